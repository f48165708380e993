"""The FastViTHD vision encoder + projector, as an ONNX graph: its contract, and ONNX Runtime running it.

A published graph may name its tensors anything, take float16, or be exported for one fixed size (the
third-party 1024 export pools its SE blocks with a constant kernel). `GraphSpec` reads all of that from
the graph once; both runtimes (`OnnxVision` here, `OpenVinoVision` in vision_runtimes) serve exactly the
sizes the graph takes and check every output against the language model's width.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from .config import MAX_RESOLUTION, PATCH
from .events import InputError, ModelFileError

log = logging.getLogger(__name__)

DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "f32": np.float32, "f16": np.float16}


class VisionEncoder(Protocol):
    """pixels (1, 3, S, S) float32 -> image embeddings (N, D) float32, N = (S/64)^2."""

    embed_dim: int
    spec: GraphSpec

    def encode(self, pixels: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class GraphSpec:
    """What a vision graph takes and gives, read from the file."""

    path: Path
    input_name: str
    input_dtype: type  # np.float32 or np.float16 (cast on the way in)
    fixed_size: int | None  # S when the graph was exported for S x S only; None: any multiple of 64
    embed_dim: int | None  # D when the graph says; None: dynamic (checked on the first output)

    def serves(self, size: int) -> bool:
        if self.fixed_size is not None:
            return size == self.fixed_size
        return PATCH <= size <= MAX_RESOLUTION and size % PATCH == 0

    @property
    def sizes(self) -> str:
        if self.fixed_size is not None:
            return f"{self.fixed_size}×{self.fixed_size} only"
        return f"multiples of {PATCH} up to {MAX_RESOLUTION}"

    def check_size(self, size: int) -> int:
        """`size` if the graph serves it, else an `InputError` naming what it serves (before any work)."""
        if not self.serves(size):
            raise InputError(f"resolution {size} is not served by {self.path.name}, which takes {self.sizes}; "
                             "ask for one of those")
        return size

    def check_pixels(self, pixels: np.ndarray) -> int:
        """The side S of one float32 (1, 3, S, S) image the graph serves (a `ValueError` for any other array: the
        caller's bug, as preprocessing makes nothing else; an `InputError` for a size the graph does not serve)."""
        if pixels.ndim != 4 or pixels.shape[:2] != (1, 3) or pixels.shape[2] != pixels.shape[3] \
                or pixels.dtype != np.float32:
            raise ValueError(f"pixels must be float32 (1, 3, S, S), got {pixels.dtype} {pixels.shape}")
        return self.check_size(pixels.shape[2])

    def check_output(self, out: np.ndarray, size: int) -> np.ndarray:
        """(1, N, D) -> (N, D) float32, after checking batch, N = (S/64)^2 and D."""
        n = (size // PATCH) ** 2
        if out.ndim != 3 or out.shape[0] != 1 or out.shape[1] != n:
            raise ModelFileError(f"{self.path} returned {tuple(out.shape)} for a {size}×{size} image; a FastVLM "
                                 f"encoder returns (1, {n}, D): this is not a FastVLM vision graph")
        if self.embed_dim is not None and out.shape[2] != self.embed_dim:
            raise ModelFileError(f"{self.path} produced {out.shape[2]}-wide embeddings, expected {self.embed_dim}")
        return np.ascontiguousarray(out[0], dtype=np.float32)


def _dims(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def _static(dim) -> int | None:
    return dim if isinstance(dim, int) and dim > 0 else None


def read_spec(path: Path, inputs: list[tuple[str, list, str]], outputs: list[tuple[str, list, str]],
              expect_dim: int | None = None, llm_path: Path | None = None) -> GraphSpec:
    """Check a graph's contract from its (name, shape, type) inputs and outputs; any names are accepted.
    Shapes hold ints for fixed axes and anything else (a name, None, -1) for dynamic ones."""
    if len(inputs) != 1 or not outputs:
        raise ModelFileError(f"{path}: a vision graph has one input and an output, found {len(inputs)} and "
                             f"{len(outputs)}: is this the vision encoder?")
    (name, shape, kind), (out_name, out_shape, out_kind) = inputs[0], outputs[0]
    if len(shape) != 4 or _static(shape[0]) not in (None, 1) or shape[1] != 3:
        raise ModelFileError(f"{path}: input {name} should be (1, 3, H, W), is {_dims(shape)}")
    if kind not in DTYPES or out_kind not in DTYPES:
        raise ModelFileError(f"{path}: input/output types {kind}/{out_kind}; float32 or float16 expected")
    if len(out_shape) != 3 or _static(out_shape[0]) not in (None, 1):
        raise ModelFileError(f"{path}: output {out_name} should be (1, N, D), is {_dims(out_shape)}")
    h, w = _static(shape[2]), _static(shape[3])
    if (h is None) != (w is None) or (h is not None and (h != w or h % PATCH)):
        raise ModelFileError(f"{path}: input {name} is {_dims(shape)}; square multiples of {PATCH} are needed")
    width = _static(out_shape[2])
    if width is not None and expect_dim is not None and width != expect_dim:
        raise ModelFileError(
            f"{path} outputs {width}-wide image embeddings but {llm_path or 'the language model'} "
            f"expects {expect_dim}: the two files belong to different FastVLM models"
        )
    if h is not None:
        log.info("%s takes %d×%d images only (exported for a fixed size)", path.name, h, h)
    return GraphSpec(Path(path), name, DTYPES[kind], h, width or expect_dim)


def onnx_io(session) -> tuple[list, list]:
    """An ONNX Runtime session's (name, shape, type) inputs and outputs."""
    return ([(i.name, list(i.shape), i.type) for i in session.get_inputs()],
            [(o.name, list(o.shape), o.type) for o in session.get_outputs()])


def warm_up_size(spec: GraphSpec) -> int:
    """One small run initialises ONNX Runtime's kernels (the first 1024 encode after a 64 px one is as fast
    as the second); a fixed-size graph takes only its own size."""
    return spec.fixed_size or PATCH


class OnnxVision:
    """An `onnxruntime.InferenceSession` with the graph's contract. Build it with `load()`."""

    runtime = "onnxruntime"

    def __init__(self, session, spec: GraphSpec):
        self._session = session
        self.spec = spec
        self.embed_dim = spec.embed_dim or 0
        self.path = spec.path
        self.precision = "f32"
        self._runs: set = set()  # RunOptions of encodes in flight, for cancel()
        self._runs_lock = threading.Lock()

    @classmethod
    def load(cls, path: Path, threads: int, expect_dim: int | None = None, llm_path: Path | None = None) -> OnnxVision:
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
        return cls(session, read_spec(path, *onnx_io(session), expect_dim=expect_dim, llm_path=llm_path))

    def encode(self, pixels: np.ndarray) -> np.ndarray:
        size = self.spec.check_pixels(pixels)
        import onnxruntime as ort

        run = ort.RunOptions()
        with self._runs_lock:
            self._runs.add(run)
        try:
            out = self._session.run(None, {self.spec.input_name: pixels.astype(self.spec.input_dtype, copy=False)},
                                    run)[0]
        except Exception as e:
            if run.terminate:
                raise EncodeCancelled() from e
            raise
        finally:
            with self._runs_lock:
                self._runs.discard(run)
        return self.spec.check_output(out, size)

    def cancel(self) -> None:
        """Abandon every encode in flight (it raises `EncodeCancelled` within a kernel or so)."""
        with self._runs_lock:
            for run in self._runs:
                run.terminate = True

    def warm_up(self, size: int) -> None:
        s = warm_up_size(self.spec)
        self.encode(np.zeros((1, 3, s, s), np.float32))

    def close(self) -> None:
        self._session = None


class EncodeCancelled(Exception):
    """An encode was abandoned by `cancel()` (Stop, a closed tab, a client that went away)."""
