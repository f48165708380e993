"""The reference vision graph: transformers' FastVLM vision tower + projector exported by torch.

Not a converter (the app converts with `fastvlm.convert.vision_graph`, without torch): this export is what the
builder's graph is held against, in kernels (tests/parity/test_vision_graph_kernels.py) and in encode time

    python -m tests.parity.torch_export CHECKPOINT_DIR OUT.onnx
    python -m fastvlm bench --compare-vision OUT.onnx BUILDER_DIR/vision.onnx

It uses the TorchScript exporter (`dynamo=False`), whose graph ran fastest of torch's two exporters.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from fastvlm.convert.checkpoint import open_checkpoint
from fastvlm.convert.vision_graph import EXTERNAL_DATA_BYTES, INPUT, OPSET, OUTPUT
from fastvlm.verify.reference import load_reference_model

log = logging.getLogger(__name__)


def export_reference_vision(checkpoint: Path, path: Path, size: int = 256) -> Path:
    """Write the torch export of `checkpoint`'s vision tower + projector to `path` (H, W dynamic)."""
    import onnx
    import torch

    class VisionProjector(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, pixel_values):  # (1, 3, H, W) -> (1, N, D)
            return self.model.get_image_features(pixel_values=pixel_values).pooler_output

    module = VisionProjector(load_reference_model(open_checkpoint(checkpoint)).model).eval().requires_grad_(False)
    example = torch.rand((1, 3, size, size), generator=torch.Generator().manual_seed(0))
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(module, (example,), str(path), dynamo=False, opset_version=OPSET,
                          input_names=[INPUT], output_names=[OUTPUT],
                          dynamic_axes={INPUT: {2: "height", 3: "width"}, OUTPUT: {1: "num_tokens"}})
    exported = onnx.load(str(path))
    if exported.ByteSize() > EXTERNAL_DATA_BYTES:
        onnx.save(exported, str(path), save_as_external_data=True, location=path.name + ".data")
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", type=Path, help="a FastVLM checkpoint folder (Apple's or transformers' layout)")
    p.add_argument("out", type=Path, help="the .onnx file to write")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    log.info("wrote %s", export_reference_vision(args.checkpoint, args.out))


if __name__ == "__main__":
    main()
