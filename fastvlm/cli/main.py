"""`python -m fastvlm predict | synth | eval | bench | convert | parity`: the command line.

Flags and environment live here only."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path

from ..engine.config import TRAINED_RESOLUTION, EngineConfig, GenerationOptions, physical_cores
from ..engine.events import Done, FirstToken, InputError, ModelFileError, Notice, Request, TextDelta
from ..convert.text_gguf import QUANTS
from ..weights.official import DEFAULT_MODEL
from ..weights.sources import SOURCES

log = logging.getLogger("fastvlm")


def env_int(name: str, default: int) -> int:
    """The whole number in the environment variable `name` (unset or empty: `default`); another value ends the
    program with one line naming it (argparse's own exit code, 2), even for --help."""
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else default
    except ValueError:
        print(f"error: {name}={value!r} is not a whole number: set a number or unset it", file=sys.stderr)
        raise SystemExit(2) from None


def env_flag(name: str, default: bool) -> bool:
    """The yes/no in the environment variable `name`: 1/true/yes/on or 0/false/no/off (any case); unset or
    empty: `default`; another value ends the program with one line naming it."""
    value = os.environ.get(name, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    if not value:
        return default
    print(f"error: {name}={value!r} is neither yes (1, true) nor no (0, false)", file=sys.stderr)
    raise SystemExit(2)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    env = os.environ.get
    g = p.add_argument_group("model")
    g.add_argument("--vision", type=Path, default=env("FASTVLM_VISION"),
                   help="vision encoder .onnx, or `int8`: the calibrated int8 file `convert --int8` wrote beside "
                        "vision.onnx (only when asked) [FASTVLM_VISION]")
    g.add_argument("--llm", type=Path, default=env("FASTVLM_LLM"), help="language model .gguf [FASTVLM_LLM]")
    g.add_argument("--models", type=Path, default=env("FASTVLM_MODELS"),
                   help="folder holding vision.onnx + llm.gguf [FASTVLM_MODELS]")
    g.add_argument("--no-download", action="store_true", help="never download weights")
    g.add_argument("--source", choices=("official", *SOURCES), default=env("FASTVLM_SOURCE"),
                   help="where the weights come from when no files are given: official (Apple's checkpoint, "
                        "converted once on this machine) or prebuilt (published CPU files); default: official, "
                        "prebuilt if that fails [FASTVLM_SOURCE]")
    g.add_argument("--model", default=env("FASTVLM_MODEL", DEFAULT_MODEL),
                   help="the official checkpoint (apple/FastVLM-0.5B, -1.5B, -7B) [FASTVLM_MODEL]")
    g.add_argument("--quant", default=env("FASTVLM_QUANT", "auto"),
                   choices=QUANTS,
                   help="GGUF type of the official conversion; auto: q8_0 where llama.cpp's AMX int8 works, else "
                        "bf16 where the CPU has native bf16 (exact to the weights), else q8_0 [FASTVLM_QUANT]")
    g.add_argument("--exact", action="store_true",
                   help="f32 everywhere (vision compute, KV cache): the setting under which answers match the "
                        "transformers reference token for token; slower")
    g.add_argument("--resolution", type=int, default=env_int("FASTVLM_RESOLUTION", 0) or None,
                   help="image size: 1024 (trained, accurate; the default) or 512 (faster, fine text suffers); "
                        "a vision file exported for one size serves only that size [FASTVLM_RESOLUTION]")
    g.add_argument("--threads", type=int, default=env_int("FASTVLM_THREADS", 0) or physical_cores(),
                   help="CPU threads (default: physical cores)")
    g.add_argument("--n-ctx", type=int, default=4096, help="context length in positions")
    g.add_argument("--vision-runtime", choices=("auto", "onnxruntime", "openvino"),
                   default=env("FASTVLM_VISION_RUNTIME", "auto"),
                   help="vision encoder runtime; auto: OpenVINO when installed, else ONNX Runtime "
                        "[FASTVLM_VISION_RUNTIME]")


def model_paths(args: argparse.Namespace, download: bool | None = None, report=None, look_only: bool = False):
    """The two files per the flags (see fastvlm.weights.resolve); `report` hears the stages of a download."""
    from ..weights import Hub, resolve

    download = not args.no_download if download is None else download
    int8 = args.vision is not None and str(args.vision) == "int8"
    paths = resolve(None if int8 else args.vision, args.llm, args.models, download=download, source=args.source,
                    hub=Hub(report=report), model=args.model,
                    quant="f32" if _exact(args) else args.quant, threads=args.threads, look_only=look_only,
                    exact=_exact(args))
    return _int8(paths, args) if int8 else paths


def _exact(args: argparse.Namespace) -> bool:
    """--exact: f32 vision compute, F32 GGUF (official conversion), f32 KV cache."""
    return getattr(args, "exact", False)


def _int8(paths, args: argparse.Namespace):
    """`--vision int8`: the int8 encoder beside the resolved vision.onnx
    (fastvlm.engine.vision_runtimes.int8_vision)."""
    from dataclasses import replace

    from ..engine.vision_runtimes import int8_vision

    vision = int8_vision(paths.vision, getattr(args, "vision_runtime", "auto"))
    return replace(paths, vision=vision, sources={**paths.sources, "vision": f"{vision.name} (int8, asked for)"})


def engine_config(args: argparse.Namespace, paths=None) -> EngineConfig:
    """The engine's config from the flags; resolves (and downloads) the weights unless `paths` are given."""
    from ..amx import llama_settings

    paths = paths or model_paths(args)
    exact = _exact(args)
    llama = llama_settings()  # on an AMX CPU: is llama.cpp's AMX path safe here (a child process, once per install)
    return EngineConfig(vision_path=paths.vision, llm_path=paths.llm, resolution=args.resolution or TRAINED_RESOLUTION,
                        threads=args.threads, n_ctx=args.n_ctx, vision_runtime=args.vision_runtime,
                        vision_precision="f32" if exact else "auto", kv_f32=exact, sources=paths.sources,
                        extra_buffers=llama.extra_buffers, llama_notice=llama.llama_notice)


def load_engine(args: argparse.Namespace):
    from ..engine.engine import Engine

    return Engine.load(engine_config(args))


def _predict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", required=True, type=Path)
    p.add_argument("--prompt", default="Describe the image.")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int)
    p.add_argument("--json", action="store_true", help="print one JSON object with the answer and timings")
    add_model_arguments(p)


def predict(args: argparse.Namespace) -> int:
    engine = load_engine(args)
    llama = {k: engine.describe().get(k, "") for k in ("llama_cpu", "llama_notice")}
    opts = GenerationOptions(max_new_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed)
    text, notices, stats = [], [], None
    try:
        for ev in engine.stream(Request(args.image, args.prompt, options=opts, resolution=args.resolution)):
            if isinstance(ev, TextDelta):
                text.append(ev.text)
                if not args.json:
                    print(ev.text, end="", flush=True)
            elif isinstance(ev, Notice):
                notices.append(ev.message)
                log.warning("%s", ev.message)
            elif isinstance(ev, FirstToken):
                log.debug("first token after %.3f s", ev.ttft_s)
            elif isinstance(ev, Done):
                stats = ev.stats
    finally:
        engine.close()
    if args.json:
        print(json.dumps({"answer": "".join(text), "notices": notices, "sources": engine.config.sources,
                          **asdict(stats),
                          "tokens_per_s": stats.tokens_per_s, **llama}, indent=2))
    else:
        print(f"\n\nTTFT {stats.ttft_s * 1000:.0f} ms (preprocess {stats.preprocess_s * 1000:.0f}, encode "
              f"{stats.encode_s * 1000:.0f}, prefill {stats.prefill_s * 1000:.0f}) · decode {stats.tokens_per_s:.1f} "
              f"tok/s · {stats.new_tokens} tokens · {stats.stop_reason}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fastvlm", description="FastVLM on CPU")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    _predict_arguments(sub.add_parser("predict", help="answer one question about one image"))
    p = sub.add_parser("download", help="fetch the model files into the Hugging Face cache (progress, resume)")
    add_model_arguments(p)
    from ..synth import models as synth
    from ..eval import cli as eval_cli

    synth.add_arguments(sub.add_parser("synth", help="write random-weight models for tests and benchmarks"))
    p = sub.add_parser("eval", help="score answers on POPE, GQA, TextVQA or OCRBench (local JSONL)")
    add_model_arguments(p)  # before eval's own flags: it reuses --resolution
    eval_cli.add_arguments(p)
    eval_cli.add_convert_arguments(sub.add_parser("eval-convert", help="turn a public dataset's files into eval JSONL"))
    from ..bench import cli as bench_cli

    p = sub.add_parser("bench", help="time TTFT, stages and decode speed (optionally against a bare baseline)")
    add_model_arguments(p)
    bench_cli.add_arguments(p)
    from ..bench import voice as voice_bench

    p = sub.add_parser("bench-voice", help="time end of speech -> first spoken answer (VAD tail, STT, TTFT, TTS)")
    add_model_arguments(p)
    voice_bench.add_arguments(p)
    from ..bench.people import run as people_bench

    people_bench.add_arguments(sub.add_parser("bench-turns", help="the end-of-turn rules on people's recorded speech "
                                              "(cuts mid-sentence, time to the end, answers withdrawn)"))
    from . import convert as convert_cli  # light: the convert extras are imported only when a command runs

    p = sub.add_parser("convert", help="FastVLM checkpoint -> vision.onnx + llm.gguf (needs requirements-convert.txt)")
    convert_cli.add_arguments(p)
    p = sub.add_parser("parity", help="check the engine against transformers on random FastVLMs")
    convert_cli.add_parity_arguments(p)
    from ..verify.doctor import cli as doctor_cli

    p = sub.add_parser("doctor",
                       help="check the install: CPU, runtimes, model files, known answers (exit 1 on a problem)")
    add_model_arguments(p)
    doctor_cli.add_arguments(p)
    return parser


def _eval(args: argparse.Namespace) -> int:
    """The files are resolved first: the answers are stamped with them, the engine loads them when needed."""
    from ..bench.stats import machine_info
    from ..engine.cpu import cpu_model
    from ..engine.engine import Engine
    from ..eval import cli as eval_cli
    from ..eval.runner import model_stamp

    paths = model_paths(args)
    quant = "f32" if _exact(args) else args.quant
    model = model_stamp(paths.vision, paths.llm, quant, args.vision_runtime, cpu_model())
    return eval_cli.run(args, lambda a: Engine.load(engine_config(a, paths)), model, machine_info(args.threads))


def _eval_convert(args: argparse.Namespace) -> int:
    from ..eval import cli as eval_cli

    return eval_cli.run_convert(args)


def _bench(args: argparse.Namespace) -> int:
    from ..bench import cli as bench_cli

    return bench_cli.run(args, load_engine)


def _bench_voice(args: argparse.Namespace) -> int:
    from ..bench import voice as voice_bench

    return voice_bench.run(args, load_engine)


def _bench_turns(args: argparse.Namespace) -> int:
    from ..bench.people import run as people_bench

    return people_bench.run(args)


def _synth(args: argparse.Namespace) -> int:
    from ..synth import models as synth

    return synth.run(args)


def _convert(args: argparse.Namespace) -> int:
    from . import convert as convert_cli

    return convert_cli.run(args)


def _parity(args: argparse.Namespace) -> int:
    from . import convert as convert_cli

    return convert_cli.run_parity_command(args)


def _doctor(args: argparse.Namespace) -> int:
    from ..verify.doctor import cli as doctor_cli

    return doctor_cli.run(args, model_paths, engine_config)


def download(args: argparse.Namespace) -> int:
    """Fetch the weights into the Hugging Face cache (or find them there) and say where each came from."""
    paths = model_paths(args)
    for part in ("vision", "llm"):
        print(f"{part}: {getattr(paths, part)}\n  from {paths.sources[part]}")
    return 0


COMMANDS = {"predict": predict, "download": download, "eval": _eval, "eval-convert": _eval_convert, "synth": _synth,
            "bench": _bench, "bench-voice": _bench_voice, "bench-turns": _bench_turns,
            "convert": _convert, "parity": _parity, "doctor": _doctor}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except (ModelFileError, InputError) as e:
        log.error("%s", e)
        return 2
    except ValueError as e:  # a flag out of range (--n-ctx, --threads, ...): EngineConfig says which and why
        log.error("%s", e, exc_info=args.verbose)
        return 2
