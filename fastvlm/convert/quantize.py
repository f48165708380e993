"""llama.cpp's own quantizer, for the converter's GGUF types (and the synthetic models)."""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
from pathlib import Path


def quantize_gguf(src: Path, dst: Path, ftype: str = "LLAMA_FTYPE_MOSTLY_Q4_K_M", threads: int | None = None) -> None:
    """`llama_model_quantize` src -> dst; `ftype` names a llama_cpp LLAMA_FTYPE_* constant."""
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as e:
        raise ImportError("quantizing a GGUF needs llama_cpp: pip install 'llama-cpp-python==0.3.36'") from e
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, ftype)
    params.nthread = threads or os.cpu_count() or 1
    native_log = logging.getLogger("llama-cpp-python")  # llama.cpp prints one line per tensor at INFO
    level = native_log.level
    native_log.setLevel(logging.ERROR)
    try:
        rc = llama_cpp.llama_model_quantize(os.fsencode(src), os.fsencode(dst), ctypes.byref(params))
    finally:
        native_log.setLevel(level)
    if rc != 0:
        raise RuntimeError(f"llama.cpp could not quantize {src} to {dst} as {ftype} (code {rc})")
