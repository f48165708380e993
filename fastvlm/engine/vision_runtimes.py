"""Vision runtimes for the same `vision.onnx`: ONNX Runtime (default dependency, portable) and OpenVINO
(optional `openvino` package, often 2x faster on x86; bf16 only where the CPU reports BF16 support).

`load_vision(path, threads, runtime)` picks one: "auto" takes OpenVINO when it is installed and the graph
loads and compiles there, else ONNX Runtime (with a logged warning saying why); "onnxruntime" / "openvino"
force one. Use the separate `openvino` package, never `onnxruntime-openvino` (it overwrites onnxruntime's
files); both runtimes live in one process.

Precision policy (`precision="auto"`): bf16 compute where the CPU computes bf16 natively (AVX-512 BF16 or
AMX, `fastvlm.engine.cpu.native_bf16`), f32 everywhere else; `--exact` asks for f32. ONNX Runtime always runs f32.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .cpu import cpu_flags, native_bf16
from .events import ModelFileError
from .vision import EncodeCancelled, GraphSpec, OnnxVision, VisionEncoder, read_spec

log = logging.getLogger(__name__)

RUNTIMES = ("auto", "onnxruntime", "openvino")
PRECISIONS = ("auto", "f32", "bf16")
OPENVINO_HINT = "pip install openvino (the separate package; not onnxruntime-openvino)"


def openvino_available() -> bool:
    return importlib.util.find_spec("openvino") is not None


def load_vision(path: Path, threads: int, runtime: str = "auto", expect_dim: int | None = None,
                llm_path: Path | None = None, precision: str = "auto", warm_size: int | None = None) -> VisionEncoder:
    """The vision encoder on the chosen runtime (see module doc). `warm_size`: compile for this image size
    now (OpenVINO), so that under "auto" a graph OpenVINO cannot compile falls back to ONNX Runtime here."""
    if runtime not in RUNTIMES:
        raise ValueError(f"vision runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if runtime == "openvino":
        return _openvino(path, threads, expect_dim, llm_path, precision, warm_size)
    if runtime == "auto" and openvino_available():
        try:
            return _openvino(path, threads, expect_dim, llm_path, precision, warm_size)
        except Exception as e:  # noqa: BLE001 - any OpenVINO failure: the portable runtime still works
            log.warning("OpenVINO could not load or compile %s (%s: %s); using ONNX Runtime (f32) instead",
                        path, type(e).__name__, e)
    return OnnxVision.load(path, threads, expect_dim=expect_dim, llm_path=llm_path)


def _openvino(path, threads, expect_dim, llm_path, precision, warm_size) -> OpenVinoVision:
    vision = OpenVinoVision.load(path, threads, expect_dim, llm_path, precision)
    if warm_size is not None:
        vision.warm_up(warm_size)
    return vision


INT8_FILES = {"openvino": "vision-int8-ov.onnx", "onnxruntime": "vision-int8-ort.onnx"}  # `convert --int8`


def int8_vision(vision: Path, runtime: str = "auto") -> Path:
    """`--vision int8`: the calibrated int8 encoder `convert --int8` wrote beside `vision` (vision.onnx), the
    one for the runtime that will run it (each runtime runs only its own file fast). Used only when asked."""
    ov = runtime == "openvino" or (runtime == "auto" and openvino_available())
    path = Path(vision).with_name(INT8_FILES["openvino" if ov else "onnxruntime"])
    if not path.is_file():
        raise ModelFileError(f"--vision int8: {path} not found; write it with `python -m fastvlm convert ... --int8` "
                             f"(its accuracy gate keeps only files whose embeddings agree with f32)")
    return path


def use_bf16(precision: str = "auto", flags: frozenset[str] | None = None, core=None) -> bool:
    """The precision policy: bf16 when asked, or under "auto" where the CPU computes bf16 natively. Where
    /proc/cpuinfo is unreadable (not Linux), OpenVINO's own report decides."""
    if precision != "auto":
        return precision == "bf16"
    flags = cpu_flags() if flags is None else flags
    return native_bf16(flags) if flags else cpu_supports_bf16(core)


def precision_words(precision: str, native: bool | None = None, asked: str = "auto", runtime: str = "openvino") -> str:
    """The policy in words for the header: why the vision encoder computes in this precision (`asked`: the
    configured vision_precision, "f32" under --exact; `runtime`: the one that loaded)."""
    native = native_bf16() if native is None else native
    if precision == "bf16":
        return "bf16 compute (CPU has native bf16)" if native else "bf16 compute (emulated: no native bf16)"
    if asked == "f32":
        return "f32 (exact)"
    if runtime == "onnxruntime":
        return "f32 (ONNX Runtime computes in f32)"
    return "f32 (CPU has no native bf16)" if not native else "f32"


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
    """An OpenVINO model on the CPU, compiled once per input size (a few sizes kept). Build it with `load()`.

    A dynamic graph is compiled static per size (faster on the CPU plugin); a fixed-size graph is compiled
    as it is and never reshaped: a reshaped fixed graph (constant pooling kernels) gives wrong embeddings."""

    runtime = "openvino"
    KEEP_COMPILED = 2  # compiled sizes kept (each holds the weights once more); older ones are dropped

    def __init__(self, core, model, config: dict, spec: GraphSpec):
        self._core, self._model, self._config = core, model, config
        self._compiled: OrderedDict[int, object] = OrderedDict()
        self._lock = threading.Lock()
        self._requests: dict[int, object] = {}  # infer requests in flight, for cancel()
        self._cancelled: set[int] = set()
        self.spec = spec
        self.embed_dim = spec.embed_dim or 0
        self.path = spec.path
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
        spec = read_spec(path, _ov_io(model.inputs), _ov_io(model.outputs), expect_dim=expect_dim, llm_path=llm_path)
        bf16 = use_bf16(precision, core=core)
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                  "INFERENCE_PRECISION_HINT": "bf16" if bf16 else "f32"}
        log.info("OpenVINO vision runtime, %s precision, %d threads", config["INFERENCE_PRECISION_HINT"], threads)
        return cls(core, model, config, spec)

    def _compiled_for(self, size: int):
        with self._lock:
            if size in self._compiled:
                self._compiled.move_to_end(size)
                return self._compiled[size]
            model = self._model
            if self.spec.fixed_size is None:
                model = model.clone()
                model.reshape({self.spec.input_name: [1, 3, size, size]})  # static shapes run faster on the CPU
            compiled = self._core.compile_model(model, "CPU", self._config)
            self._compiled[size] = compiled
            while len(self._compiled) > self.KEEP_COMPILED:
                self._compiled.popitem(last=False)
            return compiled

    def warm_up(self, size: int) -> None:
        """Compile for the default size ahead of the first request (OpenVINO compiles once per input size)."""
        self._compiled_for(self.spec.fixed_size or size)

    def encode(self, pixels: np.ndarray) -> np.ndarray:
        size = self.spec.check_pixels(pixels)
        compiled = self._compiled_for(size)
        request = compiled.create_infer_request()
        key = id(request)
        with self._lock:
            self._requests[key] = request
        try:
            request.start_async({0: pixels.astype(self.spec.input_dtype, copy=False)})
            request.wait()
            out = np.array(request.get_output_tensor(0).data)
        except Exception as e:
            if key in self._cancelled:
                raise EncodeCancelled() from e
            raise
        finally:
            with self._lock:
                del self._requests[key]
                cancelled = key in self._cancelled
                self._cancelled.discard(key)
        if cancelled:
            raise EncodeCancelled()
        return self.spec.check_output(out, size)

    def cancel(self) -> None:
        """Abandon every encode in flight (`InferRequest.cancel`)."""
        with self._lock:
            for key, request in self._requests.items():
                self._cancelled.add(key)
                request.cancel()

    def close(self) -> None:
        self._compiled.clear()
        self._model = None


def _ov_io(ports) -> list[tuple[str, list, str]]:
    """OpenVINO ports as (name, shape with None for dynamic axes, ONNX type name)."""
    types = {"f32": "tensor(float)", "f16": "tensor(float16)"}
    out = []
    for port in ports:
        shape = port.get_partial_shape()
        dims = [d.get_length() if d.is_static else None for d in shape] if shape.rank.is_static else []
        out.append((port.get_any_name(), dims, types.get(port.get_element_type().get_type_name(), "other")))
    return out
