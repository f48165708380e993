"""Vision runtimes on the same .onnx: ONNX Runtime and (when installed) OpenVINO agree; choices and errors."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm.engine.events import ModelFileError
from fastvlm.engine.vision import OnnxVision
from fastvlm.engine.vision_runtimes import load_vision, openvino_available

needs_openvino = pytest.mark.usefixtures("openvino")  # installed by requirements.txt: a skip fails under CI


@pytest.fixture
def openvino():
    return pytest.importorskip("openvino")


def _pixels(size=128, seed=0):
    return np.random.default_rng(seed).random((1, 3, size, size), dtype=np.float32)


def test_onnxruntime_on_request(tiny_models):
    vision = load_vision(tiny_models.vision, 2, "onnxruntime", expect_dim=64)
    assert isinstance(vision, OnnxVision)
    assert vision.encode(_pixels()).shape == (4, 64)


def test_auto_takes_openvino_exactly_when_installed(tiny_models):
    vision = load_vision(tiny_models.vision, 2, "auto")
    assert (type(vision).__name__ == "OpenVinoVision") == openvino_available()


def test_unknown_runtime_and_missing_file_fail_clearly(tiny_models, tmp_path):
    with pytest.raises(ValueError, match="vision runtime"):
        load_vision(tiny_models.vision, 2, "tensorrt")
    with pytest.raises(ModelFileError, match="not found"):
        load_vision(tmp_path / "nope.onnx", 2, "onnxruntime")


@needs_openvino
@pytest.mark.parametrize("precision, tol", [("f32", 1e-4), ("bf16", None)])
def test_openvino_matches_onnxruntime(tiny_models, precision, tol):
    ref = load_vision(tiny_models.vision, 2, "onnxruntime")
    ov = load_vision(tiny_models.vision, 2, "openvino", precision=precision)
    assert ov.precision == precision
    for size in (128, 192, 128):  # one compiled model per size, reused
        x = _pixels(size, seed=size)
        a, b = ref.encode(x), ov.encode(x)  # (N, D)
        assert a.shape == b.shape == ((size // 64) ** 2, 64)
        if tol is not None:
            assert np.abs(a - b).max() < tol
        else:
            assert float(np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b))) >= 0.999
    assert len(ov._compiled) == 2
    ov.close()


@needs_openvino
def test_openvino_refuses_a_vision_file_of_another_model(tiny_models):
    with pytest.raises(ModelFileError, match="different FastVLM models"):
        load_vision(tiny_models.vision, 2, "openvino", expect_dim=896, llm_path="llm.gguf")
    with pytest.raises(ValueError, match="precision"):
        load_vision(tiny_models.vision, 2, "openvino", precision="int4")
