"""What the AMX probe runs in a child process: a tiny Q8_0 model through llama.cpp, one batch and two tokens.

    python -m fastvlm.amx.child DIR

Q8_0 weights whose sizes are multiples of 32 go to llama.cpp's AMX buffer on an AMX CPU, and a batch of more
than one position runs its tile kernel (`ggml_backend_amx_mul_mat` -> `ldtilecfg`), where a miscompiled build
dies by SIGSEGV. Prints `ok <variant> <AMX_INT8 or -> ` (whether the backend has AMX kernels at all) and exits 0
when the model answered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

PROBE_TEXT = "the quick brown fox jumps over the lazy dog " * 8
PROBE_POSITIONS = 48  # one batch: more than one row, so the AMX tile kernel (not the one-row VNNI one) runs


def write_probe_model(folder: Path) -> Path:
    """The tiny synthetic Qwen2 as Q8_0 (`fastvlm synth`'s `tiny` shape: every matrix side a multiple of 32)."""
    from ..convert.quantize import quantize_gguf
    from ..synth.models import SHAPES, write_llm
    from ..synth.tokenizer import build_vocab

    f32, q8 = folder / "probe-f32.gguf", folder / "probe-q8_0.gguf"
    write_llm(f32, SHAPES["tiny"], build_vocab(), np.random.default_rng(0), name="fastvlm-amx-probe")
    quantize_gguf(f32, q8, "LLAMA_FTYPE_MOSTLY_Q8_0", threads=1)
    f32.unlink()
    return q8


def run_probe(folder: Path, threads: int = 2) -> tuple[str, bool]:
    """Load the probe model with llama.cpp's extra buffers (AMX) on, prefill one batch, sample two tokens.
    Returns (the CPU variant that ran, whether it was built with AMX int8)."""
    from ..engine.config import EngineConfig, GenerationOptions
    from ..engine.kv import Tokens
    from ..engine.llamalib import cpu_variant, features_in_use, import_llama
    from ..engine.lm import LlamaLM

    llm = write_probe_model(folder)
    config = EngineConfig(vision_path=folder / "unused.onnx", llm_path=llm, threads=threads, n_ctx=512,
                          n_batch=64, prefill_chunk=64, kv_snapshots=0, extra_buffers=True)
    lm = LlamaLM.load(config)
    try:
        ids = lm.tokenize(PROBE_TEXT, special=False)[:PROBE_POSITIONS]
        lm.prefill([Tokens(tuple(ids))])
        tokens = lm.generate(GenerationOptions(max_new_tokens=2))
        next(tokens), next(tokens)
        tokens.close()
        amx = "AMX_INT8" in features_in_use(import_llama())
    finally:
        lm.close()
    return cpu_variant(), amx


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    variant, amx = run_probe(Path(argv[0]))
    print("ok", variant, "AMX_INT8" if amx else "-", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
