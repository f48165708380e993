"""llama.cpp's CPU backend: loaded before the first model, and described; the model and context parameters.

A portable build (`GGML_BACKEND_DL` + `GGML_CPU_ALL_VARIANTS`, what requirements.txt installs on Linux x86-64)
ships one CPU backend per x86 level (`libggml-cpu-haswell.so` ... `libggml-cpu-sapphirerapids.so`) and
llama-cpp-python loads none of them: `load_cpu_backend` asks ggml to load the best one for this CPU before the first
model load. A native build (`-march=native`, what it installs elsewhere) has its CPU backend linked in: then there
is nothing to load.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import sysconfig
import threading
from pathlib import Path

from .config import EngineConfig
from .events import ModelFileError

VARIANTS = "libggml-cpu-*.so"
# pip keeps an installed (or cached) llama-cpp-python whatever build flags requirements.txt names: uninstall first
REINSTALL = "pip uninstall -y llama-cpp-python && pip install --no-cache-dir -r requirements.txt"
_lock = threading.Lock()


def library_dir(llama_cpp) -> Path:
    """Where llama-cpp-python keeps libllama.so and libggml*.so."""
    return Path(llama_cpp.__file__).parent / "lib"


def variant_dir(llama_cpp) -> Path | None:
    """The folder holding the CPU variants: the package's lib/ (requirements.txt puts them there), or the
    install prefix's bin/ (where a build with only `CMAKE_ARGS` puts them)."""
    for d in (library_dir(llama_cpp), Path(sysconfig.get_paths()["platlib"]) / "bin", Path(sys.prefix) / "bin"):
        if any(d.glob(VARIANTS)):
            return d
    return None


def _loaded_ggml() -> Path | None:
    """The libggml file this process loaded for libllama (by its soname, e.g. `libggml.so.0`)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    found = re.search(r"(/\S*/libggml\.so[.\d]*)$", maps, re.MULTILINE)
    return Path(found.group(1)) if found else None


def _ggml(llama_cpp):
    """libggml as libllama uses it. Not `llama_cpp._ggml`: that opens `libggml.so`, a second copy of the file
    libllama loads (`libggml.so.0`), whose backend registry llama.cpp never sees."""
    path = _loaded_ggml() or library_dir(llama_cpp) / "libggml.so.0"
    lib = ctypes.CDLL(str(path))
    lib.ggml_backend_dev_count.restype = ctypes.c_size_t
    lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    return lib


def load_cpu_backend(llama_cpp) -> None:
    """Make sure llama.cpp has a CPU backend: load the best variant for this CPU where none is linked in."""
    with _lock:
        try:
            ggml = _ggml(llama_cpp)
        except OSError:  # not Linux's file names (macOS, Windows): their wheels link the CPU backend in
            return
        if ggml.ggml_backend_dev_count() > 0:
            return
        folder = variant_dir(llama_cpp)
        if folder is None:
            raise ModelFileError(f"llama.cpp has no CPU backend: no {VARIANTS} in {library_dir(llama_cpp)}; "
                                 f"reinstall it: {REINSTALL}")
        ggml.ggml_backend_load_all_from_path(os.fsencode(folder))
        if ggml.ggml_backend_dev_count() == 0:
            raise ModelFileError(f"none of llama.cpp's CPU variants in {folder} runs on this CPU; reinstall it: "
                                 f"{REINSTALL}")


def cpu_variant() -> str:
    """The CPU backend this process runs: a variant's name (`haswell`, `sapphirerapids`, ...), or `built-in`
    (one backend linked in: a native build)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "unknown"
    found = re.search(r"libggml-cpu-([\w.-]+?)\.so", maps)
    return found.group(1) if found else "built-in"


def features_in_use(llama_cpp) -> list[str]:
    """The CPU features llama.cpp's backend was built with, by its own report (`AVX2`, `AVX512`, `AMX_INT8`, ...)."""
    raw = llama_cpp.llama_print_system_info()
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return re.findall(r"([A-Z][A-Z0-9_]*) = 1", text)


def import_llama():
    """`llama_cpp`, with a CPU backend loaded: how every part of the project gets llama.cpp."""
    import llama_cpp

    load_cpu_backend(llama_cpp)
    return llama_cpp


def model_params(llama_cpp, config: EngineConfig):
    """llama.cpp's model parameters for `config`. `extra_buffers` off keeps the weights out of llama.cpp's extra
    buffer types (AMX tiles, repacked Q4_0/IQ4_NL): where the AMX path crashes, the caller's probe turns it off."""
    params = llama_cpp.llama_model_default_params()
    params.use_extra_bufts = config.extra_buffers
    params.n_gpu_layers = 0  # the CPU everywhere: llama-cpp-python builds Metal into every macOS install, and its
    # default (-1) would move every layer there, a path nothing here runs or measures
    return params


def context_params(llama_cpp, config: EngineConfig):
    """llama.cpp's context parameters for `config`: every op on the CPU (a built-in GPU backend would otherwise take
    a prefill's large matrix products, `op_offload`)."""
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = config.n_ctx
    cparams.n_batch = cparams.n_ubatch = config.n_batch
    cparams.n_seq_max = 1
    cparams.n_threads = cparams.n_threads_batch = config.threads
    cparams.flash_attn_type = {None: llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
                               True: llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
                               False: llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED}[config.flash_attn]
    if config.kv_f32:
        cparams.type_k = cparams.type_v = llama_cpp.GGML_TYPE_F32
    cparams.op_offload = cparams.offload_kqv = False
    return cparams
