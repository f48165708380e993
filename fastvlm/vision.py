"""The FastViTHD vision encoder + projector, as an ONNX graph in ONNX Runtime."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

import numpy as np

from .config import PATCH
from .events import ModelFileError

log = logging.getLogger(__name__)


class VisionEncoder(Protocol):
    """pixels (1, 3, S, S) float32 -> image embeddings (N, D) float32, N = (S/64)^2."""

    embed_dim: int

    def encode(self, pixels: np.ndarray) -> np.ndarray: ...


def _dims(shape: list) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def check_io(path: Path, inputs: list, outputs: list) -> tuple[str, int | None]:
    """Check the graph's contract; returns (input name, output width D or None if dynamic)."""
    if len(inputs) != 1 or len(outputs) < 1:
        raise ModelFileError(f"{path}: expected one input and one output, found {len(inputs)} and {len(outputs)}")
    inp, out = inputs[0], outputs[0]
    batch_ok = len(inp.shape) == 4 and (inp.shape[0] == 1 or not isinstance(inp.shape[0], int))
    if not batch_ok or inp.shape[1] != 3:
        raise ModelFileError(f"{path}: input {inp.name} should be (1, 3, H, W), is {_dims(inp.shape)}")
    if inp.type != "tensor(float)":
        raise ModelFileError(f"{path}: input {inp.name} should be float32, is {inp.type}")
    if len(out.shape) != 3 or out.type != "tensor(float)":
        raise ModelFileError(f"{path}: output {out.name} should be float32 (1, N, D), is {out.type} {_dims(out.shape)}")
    width = out.shape[2] if isinstance(out.shape[2], int) else None
    return inp.name, width


class OnnxVision:
    """An `onnxruntime.InferenceSession` with shape checks. Build it with `load()`."""

    def __init__(self, session, input_name: str, embed_dim: int, path: Path):
        self._session = session
        self._input = input_name
        self.embed_dim = embed_dim
        self.path = path

    @classmethod
    def load(cls, path: Path, threads: int, expect_dim: int | None = None, llm_path: Path | None = None) -> "OnnxVision":
        import onnxruntime as ort

        path = Path(path)
        if not path.is_file():
            raise ModelFileError(f"vision encoder not found: {path} (pass --vision PATH or --models DIR)")
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types for unreadable graphs
            raise ModelFileError(f"{path} is not a loadable ONNX model ({e}); re-download or re-convert it") from e
        name, width = check_io(path, session.get_inputs(), session.get_outputs())
        if width is not None and expect_dim is not None and width != expect_dim:
            raise ModelFileError(
                f"{path} outputs {width}-wide image embeddings but {llm_path or 'the language model'} "
                f"expects {expect_dim}: the two files belong to different FastVLM models"
            )
        return cls(session, name, width or expect_dim or 0, path)

    def encode(self, pixels: np.ndarray) -> np.ndarray:
        if pixels.ndim != 4 or pixels.shape[:2] != (1, 3) or pixels.dtype != np.float32:
            raise ValueError(f"pixels must be float32 (1, 3, H, W), got {pixels.dtype} {pixels.shape}")
        (out,) = self._session.run(None, {self._input: pixels})[:1]  # (1, N, D)
        if out.shape[2] != self.embed_dim:
            raise ModelFileError(f"{self.path} produced {out.shape[2]}-wide embeddings, expected {self.embed_dim}")
        return np.ascontiguousarray(out[0], dtype=np.float32)  # (N, D)

    def warm_up(self, size: int) -> None:
        """One small run initialises ONNX Runtime's kernels; a full-size run would only cost time (measured:
        the first 1024 encode after a 64 px one is as fast as the second)."""
        self.encode(np.zeros((1, 3, PATCH, PATCH), np.float32))

    def close(self) -> None:
        self._session = None
