"""The builder's vision graph runs no more kernels than torch's export of the same weights.

Encode time is compared in the bench (`bench --compare-vision`, docs/convert.md); this is its timing-free
guard. After ONNX Runtime's fusions, every op type occurs in the builder's graph at most as often as in the
torch export: an element-wise pattern ONNX Runtime fails to fuse (a GELU written as `Mul` by 1/sqrt 2 made
the encoder 15-20 % slower) shows up here as extra Erf/Mul/Add nodes.
"""

from __future__ import annotations

import collections

import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def fused_op_counts(path, tmp_path) -> collections.Counter:
    """Op types of `path` after ONNX Runtime's graph fusions (extended level: no CPU layout transforms)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(tmp_path / f"fused-{path.stem}.onnx")
    opts.log_severity_level = 3
    ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)


@pytest.fixture(scope="module")
def graphs(apple_checkpoint, tmp_path_factory):
    from fastvlm.convert.checkpoint import open_checkpoint
    from fastvlm.convert.vision_graph import write_vision_onnx

    from .torch_export import export_reference_vision

    out = tmp_path_factory.mktemp("vision-kernels")
    builder = write_vision_onnx(open_checkpoint(apple_checkpoint), out / "builder.onnx")
    torch_export = export_reference_vision(apple_checkpoint, out / "torch.onnx")
    return fused_op_counts(builder, out), fused_op_counts(torch_export, out)


def test_no_op_type_runs_more_often_than_in_the_torch_export(graphs):
    builder, torch_export = graphs
    extra = {op: (n, torch_export[op]) for op, n in builder.items() if n > torch_export[op]}
    assert not extra, f"op: (builder, torch export) counts after fusion: {extra}"


def test_the_heavy_kernels_are_the_same(graphs):
    builder, torch_export = graphs
    for op in ("Conv", "FusedConv", "Gelu", "MatMul", "FusedMatMul", "Softmax", "LayerNormalization"):
        assert builder[op] == torch_export[op], (op, builder[op], torch_export[op])
    assert builder["Gelu"] > 0
