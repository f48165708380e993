"""Vision runtimes for the same `vision.onnx`: ONNX Runtime (default dependency, portable) and OpenVINO
(optional `openvino` package, often 2x faster on x86; bf16 only where the CPU reports BF16 support).

`load_vision(path, threads, runtime)` picks one: "auto" takes OpenVINO when it is installed, else ONNX
Runtime; "onnxruntime" / "openvino" force one. Use the separate `openvino` package, never
`onnxruntime-openvino` (it overwrites onnxruntime's files); both runtimes live in one process.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from pathlib import Path

import numpy as np

from .events import ModelFileError
from .vision import OnnxVision, VisionEncoder

log = logging.getLogger(__name__)

RUNTIMES = ("auto", "onnxruntime", "openvino")
PRECISIONS = ("auto", "f32", "bf16")
OPENVINO_HINT = "pip install openvino (the separate package; not onnxruntime-openvino)"


def openvino_available() -> bool:
    return importlib.util.find_spec("openvino") is not None


def load_vision(path: Path, threads: int, runtime: str = "auto", expect_dim: int | None = None,
                llm_path: Path | None = None, precision: str = "auto") -> VisionEncoder:
    """The vision encoder on the chosen runtime (see module doc)."""
    if runtime not in RUNTIMES:
        raise ValueError(f"vision runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "openvino" or (runtime == "auto" and openvino_available()):
        return OpenVinoVision.load(path, threads, expect_dim, llm_path, precision)
    return OnnxVision.load(path, threads, expect_dim=expect_dim, llm_path=llm_path)


def cpu_supports_bf16(core=None) -> bool:
    """True when OpenVINO's CPU plugin reports native BF16 (AVX512-BF16 or AMX)."""
    try:
        if core is None:
            import openvino as ov

            core = ov.Core()
        return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    except Exception:  # an old OpenVINO without the property: stay in f32
        return False


class OpenVinoVision:
    """An OpenVINO model on the CPU, compiled once per input size. Build it with `load()`."""

    def __init__(self, core, model, config: dict, input_name: str, embed_dim: int, path: Path):
        self._core, self._model, self._config = core, model, config
        self._input = input_name
        self._compiled: dict[tuple[int, int], object] = {}
        self._lock = threading.Lock()
        self.embed_dim = embed_dim
        self.path = path
        self.precision = config.get("INFERENCE_PRECISION_HINT", "f32")

    @classmethod
    def load(cls, path: Path, threads: int, expect_dim: int | None = None, llm_path: Path | None = None,
             precision: str = "auto") -> OpenVinoVision:
        try:
            import openvino as ov
        except ImportError as e:
            raise ImportError(f"the OpenVINO vision runtime needs openvino: {OPENVINO_HINT}") from e
        path = Path(path)
        if not path.is_file():
            raise ModelFileError(f"vision encoder not found: {path} (pass --vision PATH or --models DIR)")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        core = ov.Core()
        try:
            model = core.read_model(str(path))
        except Exception as e:  # OpenVINO raises RuntimeError subclasses for unreadable graphs
            raise ModelFileError(f"{path} is not a loadable ONNX model ({e}); re-download or re-convert it") from e
        if len(model.inputs) != 1 or model.inputs[0].get_partial_shape().rank.get_length() != 4:
            raise ModelFileError(f"{path}: expected one (1, 3, H, W) input")
        width = model.outputs[0].get_partial_shape()[2]
        dim = width.get_length() if width.is_static else None
        if dim is not None and expect_dim is not None and dim != expect_dim:
            raise ModelFileError(
                f"{path} outputs {dim}-wide image embeddings but {llm_path or 'the language model'} "
                f"expects {expect_dim}: the two files belong to different FastVLM models"
            )
        bf16 = precision == "bf16" or (precision == "auto" and cpu_supports_bf16(core))
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                  "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32"}
        log.info("OpenVINO vision runtime, %s precision, %d threads", config["INFERENCE_PRECISION_HINT"], threads)
        return cls(core, model, config, model.inputs[0].get_any_name(), dim or expect_dim or 0, path)

    def _compiled_for(self, height: int, width: int):
        with self._lock:
            key = (height, width)
            if key not in self._compiled:
                model = self._model.clone()
                model.reshape({self._input: [1, 3, height, width]})  # static shapes run faster on the CPU plugin
                self._compiled[key] = self._core.compile_model(model, "CPU", self._config)
            return self._compiled[key]

    def warm_up(self, size: int) -> None:
        """Compile for the default size ahead of the first request (OpenVINO compiles once per input size)."""
        self._compiled_for(size, size)

    def encode(self, pixels: np.ndarray) -> np.ndarray:
        if pixels.ndim != 4 or pixels.shape[:2] != (1, 3) or pixels.dtype != np.float32:
            raise ValueError(f"pixels must be float32 (1, 3, H, W), got {pixels.dtype} {pixels.shape}")
        compiled = self._compiled_for(*pixels.shape[2:])
        out = compiled(pixels)[compiled.outputs[0]]  # (1, N, D)
        if out.shape[2] != self.embed_dim:
            raise ModelFileError(f"{self.path} produced {out.shape[2]}-wide embeddings, expected {self.embed_dim}")
        return np.ascontiguousarray(out[0], dtype=np.float32)  # (N, D)

    def close(self) -> None:
        self._compiled.clear()
        self._model = None
