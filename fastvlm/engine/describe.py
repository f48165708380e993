"""What an engine has loaded, as the UI header, `/health` and `doctor` show it."""

from __future__ import annotations

from pathlib import Path

from .vision_runtimes import INT8_FILES, precision_words


def loaded(engine) -> dict:
    """`Engine.describe()`: the model files, runtimes, sizes and state of `engine`."""
    name = getattr(engine.lm, "name", "")
    return {
        "model": name,
        "synthetic": is_synthetic(name),
        "vision": str(engine.config.vision_path),
        "vision_runtime": runtime_words(engine),
        "vision_precision": precision_words(getattr(engine.vision, "precision", "f32"),
                                            asked=engine.config.vision_precision,
                                            runtime=getattr(engine.vision, "runtime", "")),
        "llm": str(engine.config.llm_path),
        "resolution": engine.resolution,
        "resolutions": list(engine.resolutions()),
        "sources": dict(engine.config.sources),
        "threads": engine.config.threads,
        "n_ctx": engine.lm.n_ctx,
        "llama_cpu": getattr(engine.lm, "cpu_variant", ""),  # llama.cpp's CPU backend (a portable build's variant)
        "llama_notice": engine.config.llama_notice,  # e.g. AMX off on this CPU, and the fix; empty when all is well
        "busy": engine.busy,
    }


def is_synthetic(name: str) -> bool:
    """Random weights (`fastvlm synth`, `convert --random-init`, converter tests): answers are gibberish (the UI
    header says so; doctor skips its known-answer checks)."""
    name = name.lower()
    return "synth" in name or "random" in name


def runtime_words(engine) -> str:
    """"OpenVinoVision bf16"; an int8 file of `convert --int8` (known by its name) says "(int8 graph)" too, since
    the precision then covers only the layers left in float."""
    words = [type(engine.vision).__name__, getattr(engine.vision, "precision", "")]
    if Path(engine.config.vision_path).name in INT8_FILES.values():
        words.append("(int8 graph)")
    return " ".join(w for w in words if w)
