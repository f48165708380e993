"""The language model's load and context parameters, on llama-cpp-python's own structs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fastvlm.engine.config import EngineConfig
from fastvlm.engine.lm import context_params, model_params

CONFIG = EngineConfig(Path("vision.onnx"), Path("llm.gguf"), threads=3, n_ctx=2048, n_batch=256)


@pytest.fixture(scope="module")
def llama_cpp():
    import llama_cpp

    return llama_cpp


def test_every_layer_stays_on_the_cpu(llama_cpp):
    """llama.cpp's default (-1) offloads every layer to a GPU backend where one is built in, as Metal is in every
    macOS build of llama-cpp-python."""
    assert llama_cpp.llama_model_default_params().n_gpu_layers != 0  # what the engine must override
    assert model_params(llama_cpp, CONFIG).n_gpu_layers == 0


def test_every_op_stays_on_the_cpu_and_the_context_is_the_configs(llama_cpp):
    default = llama_cpp.llama_context_default_params()
    assert default.op_offload and default.offload_kqv  # what the engine must override
    c = context_params(llama_cpp, CONFIG)
    assert not c.op_offload and not c.offload_kqv
    assert (c.n_ctx, c.n_batch, c.n_ubatch, c.n_seq_max, c.n_threads, c.n_threads_batch) == (2048, 256, 256, 1, 3, 3)
    assert c.type_k == default.type_k  # f16 unless asked
    exact = context_params(llama_cpp, replace(CONFIG, kv_f32=True, flash_attn=False))
    assert exact.type_k == exact.type_v == llama_cpp.GGML_TYPE_F32
    assert exact.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    assert c.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO  # None: llama.cpp decides
    forced = context_params(llama_cpp, replace(CONFIG, flash_attn=True))
    assert forced.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED


def test_libggml_is_opened_where_this_process_loaded_it_else_beside_libllama(llama_cpp, monkeypatch):
    from fastvlm.engine import llamalib

    opened = []

    class Lib:
        def __init__(self, path):
            opened.append(path)
            self.ggml_backend_dev_count = self.ggml_backend_load_all_from_path = lambda: None

    monkeypatch.setattr(llamalib.ctypes, "CDLL", Lib)
    monkeypatch.setattr(llamalib, "_loaded_ggml", lambda: Path("/opt/x/libggml.so.0"))
    llamalib._ggml(llama_cpp)
    monkeypatch.setattr(llamalib, "_loaded_ggml", lambda: None)  # /proc/self/maps unreadable or silent
    llamalib._ggml(llama_cpp)
    assert opened == ["/opt/x/libggml.so.0", str(llamalib.library_dir(llama_cpp) / "libggml.so.0")]
