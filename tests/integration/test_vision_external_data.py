"""A vision graph past protobuf's 2 GiB is saved with its weights in a `.data` file beside it. Apple's FastVLMs are
far under it (FastViTHD and the 0.5B's projector: ~129 M parameters, ~491 MB in f32), so only a larger tower would
take this branch; the tiny Apple-layout checkpoint stands in, with the size limit lowered to nothing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _embeddings(path, pixels):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"pixel_values": pixels})[0]


def test_a_graph_over_the_limit_keeps_its_weights_beside_it_and_computes_the_same(apple_checkpoint, tmp_path,
                                                                                  monkeypatch):
    from fastvlm.convert import vision_graph
    from fastvlm.convert.checkpoint import open_checkpoint

    assert 2**30 < vision_graph.EXTERNAL_DATA_BYTES < 2**31  # under protobuf's hard 2 GiB, with room for the graph
    one = vision_graph.write_vision_onnx(open_checkpoint(apple_checkpoint), tmp_path / "one" / "vision.onnx")
    monkeypatch.setattr(vision_graph, "EXTERNAL_DATA_BYTES", 0)
    split = vision_graph.write_vision_onnx(open_checkpoint(apple_checkpoint), tmp_path / "split" / "vision.onnx")
    assert sorted(p.name for p in split.parent.iterdir()) == ["vision.onnx", "vision.onnx.data"]
    assert [p.name for p in one.parent.iterdir()] == ["vision.onnx"]
    assert split.stat().st_size < one.stat().st_size / 10  # the graph without its weights
    pixels = np.random.default_rng(0).random((1, 3, 256, 256), dtype=np.float32)
    np.testing.assert_array_equal(_embeddings(split, pixels), _embeddings(one, pixels))
