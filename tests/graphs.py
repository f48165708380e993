"""Variants of a project-built vision graph, shaped like the files published on the Hub: exported for one
fixed size, with float16 inputs and outputs, with other tensor names, or with its weights in a separate file."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _load(src: Path):
    import onnx

    return onnx, onnx.load(str(src))


def fixed_size(src: Path, dst: Path, size: int) -> Path:
    """The graph with its input fixed to (1, 3, size, size) and its output to (1, N, D), as a trace with constant
    pooling kernels exports it; other sizes are refused by ONNX Runtime."""
    onnx, model = _load(src)
    (inp,), out = model.graph.input, model.graph.output[0]
    for dim, value in zip(inp.type.tensor_type.shape.dim, (1, 3, size, size)):
        dim.ClearField("dim_param")
        dim.dim_value = value
    n = (size // 64) ** 2
    out_dims = out.type.tensor_type.shape.dim
    out_dims[0].dim_value, out_dims[1].dim_value = 1, n
    onnx.save(model, str(dst))
    return dst


def float16_io(src: Path, dst: Path, names: tuple[str, str] = ("images", "embeddings")) -> Path:
    """The graph behind Cast nodes: float16 `names[0]` in, float16 `names[1]` out (like a `_fp16` export)."""
    onnx, model = _load(src)
    g = model.graph
    (inp,), out = g.input, g.output[0]
    old_in, old_out = inp.name, out.name
    g.node.insert(0, onnx.helper.make_node("Cast", [names[0]], [old_in], to=onnx.TensorProto.FLOAT))
    g.node.append(onnx.helper.make_node("Cast", [old_out], [names[1]], to=onnx.TensorProto.FLOAT16))
    inp.name, out.name = names
    inp.type.tensor_type.elem_type = out.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    onnx.save(model, str(dst))
    return dst


def external_weights(src: Path, dst: Path) -> Path:
    """The graph with its weights in `<dst name>_data` beside it (how large exports are published)."""
    onnx, model = _load(src)
    onnx.save(model, str(dst), save_as_external_data=True, all_tensors_to_one_file=True,
              location=dst.name + "_data")
    return dst


def batch_two(src: Path, dst: Path) -> Path:
    """A graph that returns two images' embeddings for one: the engine must refuse it, not keep out[0]."""
    onnx, model = _load(src)
    g = model.graph
    out = g.output[0]
    old = out.name
    g.node.append(onnx.helper.make_node("Concat", [old, old], ["doubled"], axis=0))
    out.name = "doubled"
    out.type.tensor_type.shape.dim[0].dim_param = "batch"
    onnx.save(model, str(dst))
    return dst


def pixels(size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((1, 3, size, size), dtype=np.float32)
