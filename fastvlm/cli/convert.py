"""`python -m fastvlm convert` and `python -m fastvlm parity`: flags -> the converter and the parity check."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import tempfile
import time
from pathlib import Path

from ..convert._deps import HINT
from ..convert.text_gguf import QUANTS
from ..synth.random_model import SHAPES  # torch only when a model is built

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", nargs="?", type=Path,
                        help="FastVLM checkpoint folder (Apple's llava_qwen2, e.g. apple/FastVLM-0.5B, or "
                        "transformers' FastVlmForConditionalGeneration)")
    parser.add_argument("--out", type=Path, required=True, help="folder for vision.onnx and llm.gguf")
    parser.add_argument("--quant", nargs="+", type=str.lower, choices=QUANTS, default=["auto"],
                        help="GGUF type(s); the first is written as llm.gguf, others as llm-<quant>.gguf. auto: q8_0 "
                        "where llama.cpp's AMX int8 works, else bf16 where the CPU computes bf16 natively, else q8_0")
    parser.add_argument("--resolution", type=int, default=1024, help="image size of the parity check and --int8")
    parser.add_argument("--int8", action="store_true",
                        help="also write calibrated int8 vision encoders (ONNX Runtime QDQ; "
                        "OpenVINO via NNCF if installed)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip the parity check (it needs torch + transformers and loads the whole model "
                        "in float32)")
    parser.add_argument("--random-init", action="store_true", help="convert a random-weight model of --shape instead")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.5b", help="with --random-init: the architecture")
    parser.add_argument("--apple-layout", action="store_true",
                        help="with --random-init: write the random checkpoint in Apple's llava_qwen2 layout (bf16)")
    parser.add_argument("--seed", type=int, default=0, help="with --random-init: the weights' seed")
    parser.add_argument("--threads", type=int, default=2,
                        help="threads for quantizing, the parity check and calibration")


def run(args: argparse.Namespace) -> int:
    if args.random_init == (args.checkpoint is not None):
        raise SystemExit("pass either CHECKPOINT_DIR or --random-init --shape NAME")
    if args.random_init:
        near = args.out.parent if args.out.parent.exists() else None  # the same disk as the output
        with tempfile.TemporaryDirectory(prefix="fastvlm-random-", dir=near) as tmp:
            from ..synth.apple_layout import write_apple_checkpoint
            from ..synth.random_model import write_checkpoint

            t0 = time.perf_counter()
            write = write_apple_checkpoint if args.apple_layout else write_checkpoint
            ckpt = write(Path(tmp) / f"fastvlm-synth-random-{args.shape}",
                         args.shape, args.seed)  # "synth": the UI warns
            log.info("random %s checkpoint (seed %d) in %.1fs", args.shape, args.seed, time.perf_counter() - t0)
            return _convert(ckpt, args)
    return _convert(args.checkpoint, args)


def _convert(checkpoint: Path, args: argparse.Namespace) -> int:
    from ..convert.build import convert_quants

    t0 = time.perf_counter()
    vision, llms = convert_quants(checkpoint, args.out, tuple(args.quant), args.threads,
                                  progress=lambda stage: log.info("%s", stage))
    print(f"vision: {vision} ({vision.stat().st_size / 2**20:.1f} MiB)")
    for q, path in llms.items():
        print(f"llm {q}: {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    print(f"converted in {time.perf_counter() - t0:.1f}s")
    if args.int8:
        from ..convert.int8 import write_int8

        for line in write_int8(vision, args.out, args.resolution, args.threads):
            print(line)
    if args.no_check:
        return 0
    if not all(importlib.util.find_spec(m) for m in ("torch", "timm", "transformers")):
        print(f"parity check skipped: it needs torch, timm and transformers as the reference ({HINT})")
        return 0
    from ..verify.parity import check_converted

    quant = next(iter(llms))
    report = check_converted(checkpoint, vision, llms[quant], quant, args.resolution, threads=args.threads)
    print(report.summary())
    return 0 if report.passed else 1


def add_parity_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", choices=("tiny", "full-vision"), default="tiny",
                        help="tiny: a shrunk vision tower; full-vision: the real FastViTHD (slower)")
    parser.add_argument("--seed", type=int, nargs="+", default=[0, 1], help="one random model per seed")
    modes = ["strict", "default", "fast"]
    parser.add_argument("--mode", nargs="+", choices=modes, default=modes,
                        help="strict: f32 everywhere; default: f16 KV + F16 GGUF; fast: default + OpenVINO bf16 vision")
    parser.add_argument("--tokens", type=int, default=16, help="new tokens per answer")
    parser.add_argument("--resolution", type=int, help="image size (default: 256 tiny, 512 full-vision)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the random checkpoints and converted files in this folder")


def run_parity_command(args: argparse.Namespace) -> int:
    from ..verify.parity import run_parity

    report = run_parity(args.shape, tuple(args.seed), tuple(args.mode), args.tokens, args.resolution, args.threads,
                        args.keep)
    print(report.summary())
    return 0 if report.passed else 1
