"""`python -m fastvlm doctor`: the flags, the order of the work, the printed report and the exit code.

The model flags come from `fastvlm.cli.main` (passed in as `resolve_paths` / `make_config`: no import circle).
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import replace
from pathlib import Path

from ...engine.events import InputError, ModelFileError
from ...weights.pins import PinMismatch
from . import checks, facts
from .llama import llama_section
from .report import Section, exit_code, render, to_json

log = logging.getLogger(__name__)
BF16_NAME = "llm-bf16.gguf"  # looked for beside the chosen GGUF when --reference-llm is not given


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON to FILE")
    p.add_argument("--reference-llm", type=Path, metavar="PATH",
                   help=f"a BF16 GGUF of the same model to measure the chosen one's quantization against "
                        f"(default: {BF16_NAME} beside the chosen GGUF, real weights only)")
    p.add_argument("--int8-vision", type=Path, metavar="PATH",
                   help="an int8 vision file (e.g. vision-int8-ov.onnx from convert --int8) to gate against "
                        "the f32 one")
    p.add_argument("--facts-only", action="store_true", help="read the files, run no model")


def unusable_files(error: ModelFileError) -> Section:
    """The model files could not be used: missing, or (`PinMismatch`) not the files that were pinned."""
    files = Section("Model files")
    if isinstance(error, PinMismatch):
        files.add("fail", "not the pinned file", str(error), "see the message above: re-pin it if it is trusted")
    else:
        files.add("fail", "not found", str(error), "see the message above: pass --models DIR, or --vision and --llm")
    return files


def run(args: argparse.Namespace, resolve_paths, make_config) -> int:
    machine, info = facts.machine_section(args.threads)
    llama, verdict = llama_section()
    sections, found = [machine, llama], {"machine": info}
    try:
        paths = resolve_paths(args)
    except ModelFileError as e:
        sections.append(unusable_files(e))
    else:
        llm, g = facts.llm_section(paths.llm, paths.sources.get("llm", "given"))
        vision, _ = facts.vision_section(paths.vision, paths.sources.get("vision", "given"), g)
        sections += [llm, vision]
        found["files"] = {"vision": str(paths.vision), "llm": str(paths.llm), "sources": dict(paths.sources)}
        synthetic = g is not None and facts.is_synthetic(g.name)
        if exit_code(sections) == 0 and args.facts_only:  # no model: the quantization check runs two in llama.cpp
            sections.append(_skipped_for_facts())
        elif exit_code(sections) == 0:
            sections.append(_quantization(args, paths.llm, g, synthetic, verdict))
            sections += _model_checks(args, make_config(args, paths), synthetic)
    print(render(sections))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(sections, found), indent=2, ensure_ascii=False))
    return exit_code(sections)


def _reference_llm(args, llm: Path, synthetic: bool) -> tuple[Path | None, str]:
    if args.reference_llm is not None:
        return args.reference_llm, ""
    beside = llm.parent / BF16_NAME
    if not beside.is_file() or beside.resolve() == llm.resolve():
        return None, f"no BF16 reference: pass --reference-llm PATH or put {BF16_NAME} beside {llm.name}"
    if synthetic:
        return None, "synthetic weights: their quantization numbers say little (pass --reference-llm to run anyway)"
    return beside, ""


def _skipped_for_facts() -> Section:
    s = Section("Quantization")
    s.add("skip", "quantization", "skipped: --facts-only runs no model (the check loads both GGUFs in llama.cpp)")
    return s


def _quantization(args, llm: Path, g, synthetic: bool, verdict=None) -> Section:
    s = Section("Quantization")
    reference, why = _reference_llm(args, llm, synthetic)
    if verdict is not None and not verdict.extra_buffers:  # the check runs llama.cpp in this process, AMX on
        s.add("skip", "quantization", f"skipped: {verdict.notice}")
    elif reference is None:
        s.add("skip", "quantization", why)
    elif not reference.is_file():
        s.add("fail", "reference", f"{reference} not found", "pass the path of an existing BF16 GGUF")
    else:
        checks.quant_check(llm, reference, s, threads=args.threads)
    return s


def _model_checks(args, config, synthetic: bool) -> list[Section]:
    from ...engine.engine import Engine

    engine_s = Section("Engine")
    try:
        engine = Engine.load(replace(config, kv_reuse=False))  # engines below share its LM: no KV snapshots
    except (ModelFileError, InputError, ValueError, ImportError) as e:
        engine_s.add("fail", "load", str(e), "the message names the file and the fix")
        return [engine_s]
    loaded = []
    try:
        info = engine.describe()
        synthetic = synthetic or info["synthetic"]
        engine_s.add("ok", "loaded", f"{info['model']}; vision on {info['vision_runtime']}; "
                     f"sizes {info['resolutions']}")
        st = checks.answer(engine, checks.images.red_disc(), checks.DESCRIBE, engine.resolution).stats
        engine_s.add("ok", "answer", f"{st.new_tokens} tokens at {engine.resolution}, TTFT {st.ttft_s:.2f} s "
                     f"(encode {st.encode_s:.2f}, prefill {st.prefill_s:.2f}), {st.tokens_per_s:.1f} tok/s")
        if synthetic:
            return [engine_s, _skipped(args)]
        return [engine_s, *_real_checks(args, engine, loaded)]
    finally:
        for vision in loaded:
            vision.close()
        engine.close()


def _skipped(args) -> Section:
    s = Section("Answers")
    why = "synthetic (random-weight) models answer gibberish"
    s.add("skip", "known-answer checks", f"skipped: {why}")
    s.add("skip", "runtime cross-check", f"skipped: {why}")
    if args.int8_vision:
        s.add("skip", "int8 vision gate", f"skipped: {why}")
    return s


def _real_checks(args, engine, loaded: list) -> list[Section]:
    from ...engine.vision import OnnxVision

    answers = Section(f"Known answers (greedy, at most {checks.ANSWER_TOKENS} tokens)")
    sizes = tuple(dict.fromkeys((engine.resolution, *engine.resolutions())))  # the default first, then 1024, 512
    got = checks.known_answers(engine, answers, sizes)
    checks.distinct_answers(engine, answers, engine.resolution)
    default = {c.name: got[c.name, engine.resolution] for c in checks.CASES}
    cross = Section("Vision runtimes (against ONNX Runtime f32)")
    if isinstance(engine.vision, OnnxVision):
        cross.add("skip", "runtime cross-check", "the default vision runtime is ONNX Runtime f32: it is the reference")
        reference, ref_answers = engine, default
    else:
        ref = OnnxVision.load(engine.config.vision_path, engine.config.threads, expect_dim=engine.lm.n_embd,
                              llm_path=engine.config.llm_path)
        loaded.append(ref)
        reference, ref_answers = checks.with_vision(engine, ref), None
        label = f"{type(engine.vision).__name__} {getattr(engine.vision, 'precision', '')}".strip()
        checks.vision_gate(reference, engine, cross, label, checks.RUNTIME_COSINE_MIN, must_agree=False,
                           candidate_answers=default, fix="the vision runtimes disagree: run with "
                           "--vision-runtime onnxruntime, and report the versions above")
    if args.int8_vision:
        _int8_gate(args, engine, reference, ref_answers, cross, loaded)
    return [answers, cross]


def _int8_gate(args, engine, reference, ref_answers, section: Section, loaded: list) -> None:
    from ...engine.vision_runtimes import load_vision, openvino_available

    path = args.int8_vision
    name = path.name.lower()
    runtime = ("openvino" if "-ov" in name and openvino_available() else
               "onnxruntime" if "-ort" in name else args.vision_runtime)
    try:
        int8 = load_vision(path, engine.config.threads, runtime, expect_dim=engine.lm.n_embd,
                           llm_path=engine.config.llm_path, precision=engine.config.vision_precision)
    except (ModelFileError, ImportError) as e:
        section.add("fail", "int8 vision", str(e), "pass the file convert --int8 wrote")
        return
    loaded.append(int8)
    passed = checks.vision_gate(reference, checks.with_vision(engine, int8), section, f"int8 {path.name} ({runtime})",
                                checks.INT8_COSINE_MIN, must_agree=True, reference_answers=ref_answers,
                                fix=f"do not use {path.name}: serve the f32 vision file")
    section.add("ok" if passed else "fail", "int8 gate", "passed" if passed else "failed",
                f"serve the f32 vision file instead of {path.name}")
