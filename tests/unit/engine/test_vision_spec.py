"""A vision graph's contract read from its inputs and outputs (`read_spec`), the sizes it serves and the check of
every output: each wrong shape, type or width is refused with the reason, each right one accepted, on plain
(name, shape, type) tuples as both runtimes report them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fastvlm.engine.events import InputError, ModelFileError
from fastvlm.engine.vision import GraphSpec, read_spec

PATH = Path("models/vision.onnx")
F32 = "tensor(float)"
IN = ("pixel_values", [1, 3, "height", "width"], F32)
OUT = ("image_features", [1, "n", 896], F32)


def spec(inputs=(IN,), outputs=(OUT,), **kw) -> GraphSpec:
    return read_spec(PATH, list(inputs), list(outputs), **kw)


@pytest.mark.parametrize("inputs, outputs, reason", [
    ([IN, IN], [OUT], "one input and an output, found 2 and 1"),
    ([], [OUT], "found 0 and 1"),
    ([IN], [], "found 1 and 0"),
    ([("x", [1, 3, 64], F32)], [OUT], r"should be \(1, 3, H, W\), is \(1, 3, 64\)"),
    ([("x", [2, 3, 64, 64], F32)], [OUT], r"should be \(1, 3, H, W\)"),
    ([("x", [1, 4, 64, 64], F32)], [OUT], r"should be \(1, 3, H, W\)"),
    ([("x", [1, 3, 64, 64], "tensor(int8)")], [OUT], "input/output types tensor.int8./tensor.float."),
    ([IN], [("y", [1, "n", 896], "tensor(double)")], "float32 or float16 expected"),
    ([IN], [("y", ["n", 896], F32)], r"output y should be \(1, N, D\), is \(n, 896\)"),
    ([IN], [("y", [2, "n", 896], F32)], r"should be \(1, N, D\)"),
    ([("x", [1, 3, 256, None], F32)], [OUT], "square multiples of 64"),
    ([("x", [1, 3, None, 256], F32)], [OUT], "square multiples of 64"),
    ([("x", [1, 3, 256, 512], F32)], [OUT], "square multiples of 64"),
    ([("x", [1, 3, 100, 100], F32)], [OUT], "square multiples of 64"),
])
def test_a_graph_that_is_not_a_fastvlm_encoder_is_refused_with_the_reason(inputs, outputs, reason):
    with pytest.raises(ModelFileError, match=reason):
        spec(inputs, outputs)


@pytest.mark.parametrize("batch", [1, "batch", None, -1, 0])  # 0, -1, a name or None: dynamic
def test_a_batch_of_one_or_a_dynamic_batch_is_taken(batch):
    s = spec([("images", [batch, 3, "h", "w"], "tensor(float16)")], [("out", [batch, "n", 896], F32)])
    assert (s.input_name, s.input_dtype, s.fixed_size, s.embed_dim) == ("images", np.float16, None, 896)


def test_a_fixed_square_graph_serves_its_size_only():
    s = spec([("x", [1, 3, 256, 256], F32)])
    assert s.fixed_size == 256 and s.serves(256) and not s.serves(192) and not s.serves(320)
    assert s.sizes == "256×256 only"
    with pytest.raises(InputError, match="takes 256×256 only"):
        s.check_size(192)


def test_the_width_is_checked_against_the_language_models():
    with pytest.raises(ModelFileError, match="896-wide image embeddings but llm.gguf expects 1536: the two files"):
        spec(expect_dim=1536, llm_path=Path("llm.gguf"))
    with pytest.raises(ModelFileError, match="but the language model expects 1536"):
        spec(expect_dim=1536)
    assert spec(expect_dim=896).embed_dim == 896
    assert spec(outputs=[("y", [1, "n", "d"], F32)], expect_dim=1536).embed_dim == 1536  # dynamic: the model's
    assert spec(outputs=[("y", [1, "n", "d"], F32)]).embed_dim is None  # checked on the first output instead


@pytest.mark.parametrize("size, served", [(0, False), (64, True), (100, False), (512, True), (1024, True),
                                          (1088, False)])
def test_a_dynamic_graph_serves_multiples_of_64_from_64_to_1024(size, served):
    assert spec().serves(size) is served
    assert spec().sizes == "multiples of 64 up to 1024"


@pytest.mark.parametrize("shape, reason", [
    ((4, 896), "returned \\(4, 896\\) for a 128×128 image"),
    ((2, 4, 896), "returned \\(2, 4, 896\\)"),
    ((1, 5, 896), "returns \\(1, 4, D\\)"),
    ((1, 4, 512), "512-wide embeddings, expected 896"),
])
def test_every_output_is_checked_before_it_is_used(shape, reason):
    with pytest.raises(ModelFileError, match=reason):
        spec().check_output(np.zeros(shape, np.float32), 128)


def test_a_good_output_comes_back_as_contiguous_float32_rows():
    out = np.arange(4 * 896, dtype=np.float16).reshape(1, 4, 896)
    rows = spec().check_output(out, 128)
    assert rows.dtype == np.float32 and rows.shape == (4, 896) and rows.flags.c_contiguous
    np.testing.assert_array_equal(rows, out[0].astype(np.float32))
    dynamic = spec(outputs=[("y", [1, "n", "d"], F32)])
    assert dynamic.check_output(np.zeros((1, 4, 77), np.float32), 128).shape == (4, 77)  # no width to hold it to
