"""The language model's load parameters, on llama-cpp-python's own struct."""

from __future__ import annotations

from pathlib import Path

from fastvlm.engine.config import EngineConfig
from fastvlm.engine.lm import model_params


def test_every_layer_stays_on_the_cpu():
    """llama.cpp's default (-1) offloads every layer to a GPU backend where one is built in, as Metal is in every
    macOS build of llama-cpp-python."""
    import llama_cpp

    assert llama_cpp.llama_model_default_params().n_gpu_layers != 0  # what the engine must override
    params = model_params(llama_cpp, EngineConfig(Path("vision.onnx"), Path("llm.gguf")))
    assert params.n_gpu_layers == 0
