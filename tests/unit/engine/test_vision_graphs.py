"""Published vision graphs load as they are: fixed size served at its size only (never reshaped), float16
and other tensor names accepted, every output checked, a wrong batch refused, sizes validated first."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm.engine.events import InputError, ModelFileError
from fastvlm.engine.vision_runtimes import load_vision
from tests import graphs

RUNTIMES = ["onnxruntime", "openvino"]


@pytest.fixture(autouse=True)
def _runtime_installed(request):
    """OpenVINO is a requirement: without it its cases skip by pytest's own message, which fails under CI."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("runtime") == "openvino":
        pytest.importorskip("openvino")


@pytest.fixture(scope="module")
def variants(tiny_models, tmp_path_factory):
    d = tmp_path_factory.mktemp("graphs")
    src = tiny_models.vision
    return {
        "fixed256": graphs.fixed_size(src, d / "fixed256.onnx", 256),
        "fp16": graphs.float16_io(src, d / "fp16.onnx"),
        "batch2": graphs.batch_two(src, d / "batch2.onnx"),
        "external": graphs.external_weights(src, d / "ext.onnx"),
    }


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_fixed_size_graph_serves_its_size_only(variants, tiny_models, runtime):
    ref = load_vision(tiny_models.vision, 2, "onnxruntime", precision="f32")
    fixed = load_vision(variants["fixed256"], 2, runtime, expect_dim=64, precision="f32")
    assert fixed.spec.fixed_size == 256 and fixed.spec.serves(256) and not fixed.spec.serves(128)
    fixed.warm_up(1024)  # warms up at its own size, whatever the default: no INVALID_ARGUMENT
    x = graphs.pixels(256)
    np.testing.assert_allclose(fixed.encode(x), ref.encode(x), atol=1e-5)
    with pytest.raises(InputError, match="256×256 only"):
        fixed.encode(graphs.pixels(128))  # never reshaped to another size


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_float16_io_and_other_names_are_cast(variants, tiny_models, runtime):
    ref = load_vision(tiny_models.vision, 2, "onnxruntime")
    half = load_vision(variants["fp16"], 2, runtime, expect_dim=64, precision="f32")
    assert half.spec.input_name == "images" and half.spec.input_dtype == np.float16
    x = graphs.pixels(128)
    out = half.encode(x)
    assert out.dtype == np.float32 and out.shape == (4, 64)
    np.testing.assert_allclose(out, ref.encode(x), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_output_of_the_wrong_batch_is_refused_not_sliced(variants, runtime):
    with pytest.raises(ModelFileError, match=r"should be \(1, N, D\)|not a FastVLM vision graph"):
        load_vision(variants["batch2"], 2, runtime, expect_dim=64, precision="f32").encode(graphs.pixels(128))
    # the output check itself, for a runtime that cannot tell the batch before running
    spec = load_vision(variants["fp16"], 2, "onnxruntime").spec
    with pytest.raises(ModelFileError, match="not a FastVLM vision graph"):
        spec.check_output(np.zeros((2, 4, 64), np.float32), 128)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_pixels_that_are_not_one_float32_rgb_image_are_refused_before_any_work(tiny_models, runtime):
    vision = load_vision(tiny_models.vision, 2, runtime, expect_dim=64, precision="f32")
    assert vision.embed_dim == 64
    for pixels in (np.zeros((1, 3, 64), np.float32), np.zeros((1, 1, 64, 64), np.float32),
                   np.zeros((2, 3, 64, 64), np.float32), np.zeros((1, 3, 64, 64), np.float64),
                   np.zeros((1, 3, 64, 128), np.float32)):  # was: ONNX Runtime blamed the graph, OpenVINO a shape
        with pytest.raises(ValueError, match=r"pixels must be float32 \(1, 3, S, S\), got"):
            vision.encode(pixels)


def test_weights_in_a_separate_file_load(variants, tiny_models):
    from fastvlm.weights.resolve import external_data

    assert external_data(variants["external"]) == ["ext.onnx_data"]
    assert external_data(tiny_models.vision) == []
    v = load_vision(variants["external"], 2, "onnxruntime")
    assert v.encode(graphs.pixels(64)).shape == (1, 64)


def test_dynamic_graphs_serve_multiples_of_64_up_to_the_trained_size(tiny_models):
    v = load_vision(tiny_models.vision, 2, "onnxruntime")
    assert v.spec.fixed_size is None
    assert v.spec.serves(64) and v.spec.serves(1024) and not v.spec.serves(1088) and not v.spec.serves(100)
    with pytest.raises(InputError, match="multiples of 64 up to 1024"):
        v.encode(graphs.pixels(2048))


def test_the_engine_adopts_a_fixed_graphs_size_and_refuses_others_before_work(variants, tiny_models):
    from fastvlm import EngineConfig, Request
    from fastvlm.engine.engine import Engine

    config = EngineConfig(vision_path=variants["fixed256"], llm_path=tiny_models.llm, resolution=128, threads=2,
                          n_ctx=1024, vision_runtime="onnxruntime")
    engine = Engine.load(config)
    try:
        assert engine.resolution == 256 and engine.resolutions() == (256,)
        assert engine.describe()["resolutions"] == [256]
        calls = []
        engine.vision.encode = lambda px, f=engine.vision.encode: calls.append(px.shape) or f(px)
        with pytest.raises(InputError, match="256×256 only"):
            engine.answer(Request(np.zeros((32, 32, 3), np.uint8), "q", resolution=512))
        with pytest.raises(InputError, match="multiple of 64"):
            engine.answer(Request(np.zeros((32, 32, 3), np.uint8), "q", resolution=16384))
        assert calls == [] and not engine.busy
        result = engine.answer(Request(np.zeros((32, 32, 3), np.uint8), "q"))
        assert result.stats.image_tokens == 16 and calls == [(1, 3, 256, 256)]
    finally:
        engine.close()
