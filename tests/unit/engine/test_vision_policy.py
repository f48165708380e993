"""The vision runtime choice and precision policy: OpenVINO by default where it loads, ONNX Runtime as the
fallback; bf16 compute only where the CPU has native bf16; the policy in words in the header."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from fastvlm.engine import vision_runtimes
from fastvlm.engine.describe import runtime_words
from fastvlm.engine.vision import OnnxVision
from fastvlm.engine.vision_runtimes import load_vision, precision_words, use_bf16
from ui.widgets import header_markdown

NATIVE = frozenset({"avx2", "avx512f", "avx512_bf16"})
NO_BF16 = frozenset({"avx2", "avx512f"})


def test_bf16_only_where_native_or_asked():
    assert use_bf16("auto", NATIVE) is True
    assert use_bf16("auto", NO_BF16) is False
    assert use_bf16("auto", frozenset({"amx_bf16"})) is True
    assert use_bf16("f32", NATIVE) is False  # --exact
    assert use_bf16("bf16", NO_BF16) is True


def test_precision_in_words():
    assert precision_words("bf16", native=True) == "bf16 compute (CPU has native bf16)"
    assert precision_words("f32", native=False) == "f32 (CPU has no native bf16)"
    assert precision_words("f32", native=True, asked="f32") == "f32 (exact)"
    assert precision_words("f32", native=True, runtime="onnxruntime") == "f32 (ONNX Runtime computes in f32)"
    assert precision_words("f32", native=False, asked="f32") == "f32 (exact)"  # --exact says so on any CPU


def test_auto_falls_back_to_onnxruntime_when_openvino_fails(tiny_models, monkeypatch, caplog):
    def broken(*a, **kw):
        raise RuntimeError("Exception from src/inference/src/cpp/core.cpp: compile failed")

    monkeypatch.setattr(vision_runtimes, "openvino_available", lambda: True)
    monkeypatch.setattr(vision_runtimes.OpenVinoVision, "load", broken)
    with caplog.at_level(logging.WARNING, logger="fastvlm.engine.vision_runtimes"):
        vision = load_vision(tiny_models.vision, 2, "auto", expect_dim=64, warm_size=128)
    assert isinstance(vision, OnnxVision)
    assert "compile failed" in caplog.text and "ONNX Runtime" in caplog.text
    with pytest.raises(RuntimeError, match="compile failed"):  # asked for by name: no silent fallback
        load_vision(tiny_models.vision, 2, "openvino")


def test_auto_fallback_also_covers_the_first_compile(tiny_models, monkeypatch):
    pytest.importorskip("openvino")

    def no_compile(self, size):
        raise RuntimeError(f"cannot compile for {size}")

    monkeypatch.setattr(vision_runtimes.OpenVinoVision, "warm_up", no_compile)
    assert isinstance(load_vision(tiny_models.vision, 2, "auto", warm_size=128), OnnxVision)
    assert type(load_vision(tiny_models.vision, 2, "auto")).__name__ == "OpenVinoVision"  # compiled lazily


def test_header_says_the_policy():
    info = {"model": "m", "vision": "v.onnx", "llm": "l.gguf", "resolution": 1024, "threads": 2, "n_ctx": 4096,
            "sources": {"vision": "local"}, "vision_runtime": "OpenVinoVision bf16",
            "vision_precision": precision_words("bf16", native=True)}
    assert "bf16 compute (CPU has native bf16)" in header_markdown(info, "FastVLM")


def test_int8_only_when_asked_and_for_the_runtime_that_runs_it(tiny_models, tmp_path):
    from fastvlm.cli.main import build_parser, model_paths
    from fastvlm.engine.events import ModelFileError
    from fastvlm.engine.vision_runtimes import int8_vision

    for name in ("vision.onnx", "llm.gguf"):
        (tmp_path / name).symlink_to(getattr(tiny_models, name.split(".")[0] if name != "llm.gguf" else "llm"))
    with pytest.raises(ModelFileError, match="convert .* --int8"):
        int8_vision(tmp_path / "vision.onnx", "onnxruntime")
    (tmp_path / "vision-int8-ort.onnx").symlink_to(tiny_models.vision)
    (tmp_path / "vision-int8-ov.onnx").symlink_to(tiny_models.vision)
    parse = build_parser().parse_args
    plain = model_paths(parse(["predict", "--image", "x.png", "--models", str(tmp_path), "--no-download"]))
    assert plain.vision.name == "vision.onnx"
    for runtime, name in (("onnxruntime", "vision-int8-ort.onnx"), ("openvino", "vision-int8-ov.onnx")):
        args = parse(["predict", "--image", "x.png", "--models", str(tmp_path), "--no-download", "--vision", "int8",
                      "--vision-runtime", runtime])
        paths = model_paths(args)
        assert paths.vision == tmp_path / name and "int8" in paths.sources["vision"]


@pytest.mark.parametrize("file, words", [("vision.onnx", "OpenVinoVision f32"),
                                         ("vision-int8-ov.onnx", "OpenVinoVision f32 (int8 graph)")])
def test_the_runtime_words_say_when_the_graph_is_int8(file, words):
    class OpenVinoVision:  # as named in the header; precision is the compute hint for the float layers
        precision = "f32"

    engine = SimpleNamespace(vision=OpenVinoVision(), config=SimpleNamespace(vision_path=f"models/{file}"))
    assert runtime_words(engine) == words
