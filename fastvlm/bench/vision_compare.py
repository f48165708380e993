"""`python -m fastvlm bench --compare-vision A.onnx B.onnx ...`: vision graphs' encode time, same run.

Every graph is loaded on each runtime the app uses (ONNX Runtime f32, OpenVINO at the app's precision) through
the app's own loaders, warmed up at each size, then timed in turns — A, B, A, B, ... — so that a change in the
machine's load falls on all graphs alike. The first graph is the baseline of the ratios. Built to hold the
torch-free builder's graph against a torch-exported one of the same weights (docs/convert.md).
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
RUNTIMES = ("onnxruntime", "openvino")


@dataclass(frozen=True)
class EncodeTimes:
    """Encode seconds of one graph on one runtime at one size."""

    graph: str
    runtime: str
    size: int
    times_s: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    def row(self, baseline: "EncodeTimes") -> dict:
        return {"graph": self.graph, "runtime": self.runtime, "size": self.size, "median_s": self.median_s,
                "min_s": min(self.times_s), "runs": len(self.times_s),
                "ratio_to_first": self.median_s / baseline.median_s}


def _load(path: Path, runtime: str, threads: int, size: int):
    from ..vision_runtimes import load_vision, openvino_available

    if runtime == "openvino" and not openvino_available():
        return None
    vision = load_vision(path, threads, runtime=runtime)
    vision.warm_up(size)
    return vision


def time_in_turns(encoders: list, pixels: np.ndarray, runs: int) -> list[list[float]]:
    """`runs` encodes of `pixels` by each encoder, interleaved; seconds per encoder."""
    times = [[] for _ in encoders]
    for _ in range(runs):
        for vision, out in zip(encoders, times):
            t = time.perf_counter()
            vision.encode(pixels)
            out.append(time.perf_counter() - t)
    return times


def compare(graphs: list[Path], sizes: tuple[int, ...], threads: int, runs: int,
            runtimes: tuple[str, ...] = RUNTIMES) -> list[dict]:
    """One row per (runtime, size, graph); OpenVINO is left out (logged) where it is not installed."""
    rows = []
    rng = np.random.default_rng(0)
    for runtime in runtimes:
        for size in sizes:
            encoders = [_load(g, runtime, threads, size) for g in graphs]
            if any(e is None for e in encoders):
                log.warning("%s is not installed: not compared", runtime)
                break
            pixels = rng.random((1, 3, size, size), dtype=np.float32)
            try:
                times = time_in_turns(encoders, pixels, runs)
            finally:
                for e in encoders:
                    e.close()
            results = [EncodeTimes(str(g), runtime, size, tuple(t)) for g, t in zip(graphs, times)]
            rows += [r.row(results[0]) for r in results]
    return rows


def print_rows(rows: list[dict]) -> None:
    for r in rows:
        print(f"{r['runtime']:>12} @ {r['size']:>4}: median {r['median_s'] * 1000:7.1f} ms (min "
              f"{r['min_s'] * 1000:7.1f}, {r['runs']} runs) · {r['ratio_to_first']:.3f} x first · {r['graph']}")
