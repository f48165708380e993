"""Calibrated int8 vision encoders, one per runtime (each runs its own file fast; the other's is slow):

- `vision-int8-ort.onnx`: ONNX Runtime static QDQ (per-channel int8 weights, uint8 activations, MinMax);
  `quantize_dynamic` (Conv -> ConvInteger) was ~9x slower and is not used;
- `vision-int8-ov.onnx`: NNCF post-training quantization for OpenVINO (only when `nncf` + `openvino` are
  installed); ONNX Runtime's CPU provider runs it slowly, so give it to `--vision-runtime openvino`.

Accuracy gate: every file's image embeddings must have cosine >= 0.999 with the fp32 file's on the sample
images, else the file is deleted and the failure reported.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

from fastvlm.engine import preprocess

from ._deps import require

log = logging.getLogger(__name__)

COSINE_GATE = 0.999
N_CALIBRATION = 12


def calibration_images(n: int = N_CALIBRATION, folder: Path | None = None) -> list[PILImage.Image]:
    """Images from `folder` (sorted), else deterministic synthetic ones: smooth colour fields, stripes, noise."""
    if folder is not None:
        files = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png", ".webp"))
        return [preprocess.load_image(p) for p in files[:n]]
    out = []
    for i in range(n):
        rng = np.random.default_rng(100 + i)
        w, h = (int(x) for x in rng.integers(200, 640, 2))
        cell = int(rng.integers(4, 64))
        coarse = rng.integers(0, 256, (h // cell + 2, w // cell + 2, 3), dtype=np.uint8)
        img = np.asarray(PILImage.fromarray(coarse).resize((w, h), PILImage.Resampling.BICUBIC)).astype(np.int16)
        if i % 3 == 1:  # stripes, like text or fences
            img[:, :: int(rng.integers(3, 12))] //= 3
        if i % 3 == 2:  # sensor noise
            img += rng.integers(-20, 20, img.shape).astype(np.int16)
        out.append(PILImage.fromarray(img.clip(0, 255).astype(np.uint8)))
    return out


@dataclass(frozen=True)
class Int8File:
    runtime: str  # "onnxruntime" | "openvino"
    path: Path | None  # None: not written (gate failed or runtime missing)
    cosine: float  # min over the check images of the embeddings' cosine with fp32
    seconds: float
    note: str = ""

    def describe(self) -> str:
        where = self.path or "not written"
        line = f"int8 {self.runtime}: {where} (cosine vs fp32 {self.cosine:.5f}, {self.seconds:.0f}s) {self.note}"
        return line.rstrip()


def _pixels(images, resolution: int) -> list[np.ndarray]:
    return [preprocess.to_pixels(img, resolution) for img in images]  # each (1, 3, S, S)


def _ort_session(path: Path, threads: int):
    ort = require("onnxruntime")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def min_cosine(reference: list[np.ndarray], got: list[np.ndarray]) -> float:
    """Smallest per-image cosine between flattened embeddings; NaN if any image's is (a broken file's NaN
    embeddings must not hide behind `min`, which skips a NaN that is not first)."""
    return nan_min([float(np.dot(a.ravel(), b.ravel()) / (np.linalg.norm(a) * np.linalg.norm(b)))
                    for a, b in zip(reference, got)])


def nan_min(values: list[float]) -> float:
    """The smallest of `values`, or NaN if any is NaN (`min` skips a NaN that is not first)."""
    return float("nan") if any(math.isnan(v) for v in values) else min(values)


def quantize_for_onnxruntime(src: Path, dst: Path, pixels: list[np.ndarray]) -> None:
    q = require("onnxruntime.quantization")

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self._it = iter([{"pixel_values": p} for p in pixels])

        def get_next(self):
            return next(self._it, None)

    q.quantize_static(str(src), str(dst), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8,
                      op_types_to_quantize=["Conv", "MatMul", "Gemm"], calibrate_method=q.CalibrationMethod.MinMax)


def quantize_for_openvino(src: Path, dst: Path, pixels: list[np.ndarray]) -> None:
    os.environ.setdefault("NNCF_CI", "1")  # NNCF sends usage telemetry unless told this; we send nothing
    nncf = require("nncf")
    onnx = require("onnx")
    model = onnx.load(str(src))
    quantized = nncf.quantize(model, nncf.Dataset([{"pixel_values": p} for p in pixels]), subset_size=len(pixels),
                              model_type=nncf.ModelType.TRANSFORMER)
    onnx.save(quantized, str(dst))


def write_int8(fp32: Path, out_dir: Path, resolution: int, threads: int = 2,
               calibration: Path | None = None) -> list[str]:
    """Write and gate the int8 file(s); returns one line per runtime for the CLI."""
    images = calibration_images(folder=calibration)
    calib, check = _pixels(images, resolution), _pixels(list(_check_images()), resolution)
    ref_session = _ort_session(fp32, threads)
    reference = [ref_session.run(None, {"pixel_values": p})[0] for p in check]
    results = [_one("onnxruntime", quantize_for_onnxruntime, fp32, Path(out_dir) / "vision-int8-ort.onnx", calib,
                    check, reference, lambda path: _run_ort(path, threads))]
    if importlib.util.find_spec("nncf") and importlib.util.find_spec("openvino"):
        results.append(_one("openvino", quantize_for_openvino, fp32, Path(out_dir) / "vision-int8-ov.onnx", calib,
                            check, reference, lambda path: _run_openvino(path, threads)))
    else:
        results.append(Int8File("openvino", None, float("nan"), 0.0, "(needs: pip install nncf openvino)"))
    return [r.describe() for r in results]


def _check_images():
    return sample_images().values()


def _run_ort(path: Path, threads: int):
    session = _ort_session(path, threads)
    return lambda p: session.run(None, {"pixel_values": p})[0]


def _run_openvino(path: Path, threads: int):
    from fastvlm.engine.vision_runtimes import OpenVinoVision

    vision = OpenVinoVision.load(path, threads, precision="f32")
    return lambda p: vision.encode(p)[None]


def _one(runtime, quantize, fp32: Path, dst: Path, calib, check, reference, runner) -> Int8File:
    """Quantize under a name of its own and give the file its real name only once it passed the gate, so an
    interrupted run never leaves an ungated file where `--vision int8` looks."""
    t0 = time.perf_counter()
    dst.unlink(missing_ok=True)  # an older file belongs to an older fp32 graph
    tmp = dst.with_name(f"{dst.stem}.{os.getpid()}.partial{dst.suffix}")
    try:
        quantize(fp32, tmp, calib)
        run = runner(tmp)
        cos = min_cosine(reference, [run(p) for p in check])
        seconds = time.perf_counter() - t0
        if not cos >= COSINE_GATE:  # NaN fails too
            log.warning("int8 %s: cosine %.5f < %.3f against fp32; the file was not kept", runtime, cos, COSINE_GATE)
            return Int8File(runtime, None, cos, seconds, f"(below the {COSINE_GATE} gate)")
        tmp.replace(dst)
        return Int8File(runtime, dst, cos, seconds)
    finally:
        tmp.unlink(missing_ok=True)


def sample_images() -> dict[str, PILImage.Image]:
    """Two different deterministic pictures: a square one and a wide one (which gets padded)."""
    out = {}
    for name, (w, h), seed in (("square", (320, 320), 11), ("wide", (480, 272), 12)):
        rng = np.random.default_rng(seed)
        coarse = rng.integers(0, 256, (h // 16 + 1, w // 16 + 1, 3), dtype=np.uint8)  # smooth blobs of colour
        img = PILImage.fromarray(coarse).resize((w, h), PILImage.Resampling.BICUBIC)
        out[name] = img
    return out
