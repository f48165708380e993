"""Vision tower + projector -> ONNX: pixel_values (1, 3, H, W) float32 -> image_features (1, N, D) float32.

The TorchScript-based exporter (`dynamo=False`) is used: the dynamo exporter's graph ran 20-37 % slower in
ONNX Runtime. H and W are dynamic (multiples of 64). timm's fastvit SE block squeezes with a global
`mean`, which exports with dynamic shapes; Apple's MobileCLIP code used `avg_pool2d(kernel_size=[h, w])`,
which fixes them, so any such module is swapped for a global mean while exporting (`global_mean_se`).
Every export is checked against torch at two sizes; the max abs difference is reported.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._deps import require

log = logging.getLogger(__name__)

OPSET = 17
INPUT, OUTPUT = "pixel_values", "image_features"
EXTERNAL_DATA_BYTES = 1_900_000_000  # protobuf caps one file at 2 GiB


def vision_module(tower, projector):
    """The exported function: forward_features, flatten to tokens, project."""
    torch = require("torch")

    class VisionProjector(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tower, self.projector = tower, projector

        def forward(self, pixel_values):  # (1, 3, H, W)
            x = self.tower.forward_features(pixel_values)  # (1, C, H/64, W/64)
            x = x.flatten(2).permute(0, 2, 1)  # (1, N, C)
            return self.projector(x)  # (1, N, D)

    return VisionProjector().eval()


@contextmanager
def global_mean_se(module):
    """Swap `F.avg_pool2d(x, kernel_size=[h, w])` global pooling (Apple's SEBlock) for `x.mean((2, 3))`."""
    torch = require("torch")
    originals = {}
    for m in module.modules():
        if type(m).__name__ == "SEBlock" and hasattr(m, "reduce") and hasattr(m, "expand"):
            cls = type(m)

            def forward(self, x):
                s = x.mean((2, 3), keepdim=True)  # == avg_pool2d over the whole (h, w) map
                return x * torch.sigmoid(self.expand(torch.relu(self.reduce(s))))

            originals[m] = cls
            m.__class__ = type(cls.__name__, (cls,), {"forward": forward})
    try:
        yield len(originals)
    finally:
        for m, cls in originals.items():
            m.__class__ = cls


@dataclass(frozen=True)
class VisionExport:
    path: Path
    embed_dim: int
    max_abs_diff: float  # ONNX Runtime vs torch, over the checked sizes
    checked_sizes: tuple[int, ...]
    seconds: float


def export_vision(tower, projector, path: Path, resolution: int = 1024,
                  check_sizes: tuple[int, ...] = ()) -> VisionExport:
    """Write `path` (plus `path.data` when over 2 GiB) and check it against torch."""
    torch = require("torch")
    onnx = require("onnx")
    t0 = time.perf_counter()
    module = vision_module(tower, projector)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    example = torch.rand((1, 3, resolution, resolution), generator=torch.Generator().manual_seed(0))
    with global_mean_se(module) as n_patched, torch.no_grad():
        if n_patched:
            log.info("export: %d SE blocks squeeze with a global mean", n_patched)
        torch.onnx.export(
            module, (example,), str(path), dynamo=False, opset_version=OPSET,
            input_names=[INPUT], output_names=[OUTPUT],
            dynamic_axes={INPUT: {2: "height", 3: "width"}, OUTPUT: {1: "num_tokens"}},
        )
    model = onnx.load(str(path))
    _fix_dims(model.graph.input[0], 1, 3, "height", "width")  # (1, 3, H, W)
    _fix_dims(model.graph.output[0], 1, "num_tokens", projector.linear_2.out_features)  # (1, N, D)
    if model.ByteSize() > EXTERNAL_DATA_BYTES:
        onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data")
    else:
        onnx.save(model, str(path))
    sizes = check_sizes or (resolution, max(64, resolution // 2))
    diff = max(check_against_torch(module, path, s) for s in dict.fromkeys(sizes))
    dim = projector.linear_2.out_features
    return VisionExport(path, dim, diff, tuple(dict.fromkeys(sizes)), time.perf_counter() - t0)


def _fix_dims(value_info, *dims) -> None:
    shape = value_info.type.tensor_type.shape
    for d, want in zip(shape.dim, dims):
        if isinstance(want, int):
            d.dim_value = want
        else:
            d.dim_param = want


def check_against_torch(module, path: Path, size: int, seed: int = 1) -> float:
    """Max abs difference between ONNX Runtime and torch on one random image of `size`."""
    torch = require("torch")
    ort = require("onnxruntime")
    pixels = torch.rand((1, 3, size, size), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        want = module(pixels).numpy()  # (1, N, D)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {INPUT: pixels.numpy()})
    if got.shape != want.shape:
        raise AssertionError(f"{path}: ONNX output {got.shape} at {size}px, torch gives {want.shape}")
    diff = float(np.abs(got - want).max())
    log.info("vision %s at %dpx: max |onnx - torch| = %.2e (output scale %.2e)", path.name, size, diff,
             float(np.abs(want).max()))
    return diff
