"""`python -m fastvlm bench --compare-vision A.onnx B.onnx ...`: vision graphs' encode time, same run.

Every graph is loaded on each runtime the app uses (ONNX Runtime f32, OpenVINO at the app's precision) through
the app's own loaders, warmed up at each size, then timed in turns — A, B, A, B, ... — so that a change in the
machine's load falls on all graphs alike. The first graph is the baseline of the ratios. Built to hold the
torch-free builder's graph against a torch-exported one of the same weights (docs/convert.md).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from ..engine.vision_runtimes import load_vision, openvino_available
from .stats import summarize

log = logging.getLogger(__name__)
RUNTIMES = ("onnxruntime", "openvino")


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
        if runtime == "openvino" and not openvino_available():
            log.warning("OpenVINO is not installed: not compared")
            continue
        for size in sizes:
            encoders = [load_vision(g, threads, runtime=runtime) for g in graphs]
            try:
                for e in encoders:
                    e.warm_up(size)
                times = time_in_turns(encoders, rng.random((1, 3, size, size), dtype=np.float32), runs)
            finally:
                for e in encoders:
                    e.close()
            stats = [summarize(t) for t in times]
            rows += [{"graph": str(g), "runtime": runtime, "size": size, "median_s": s["median"], "min_s": s["min"],
                      "runs": s["n"], "ratio_to_first": s["median"] / stats[0]["median"]}
                     for g, s in zip(graphs, stats)]
    return rows


def print_rows(rows: list[dict]) -> None:
    for r in rows:
        print(f"{r['runtime']:>12} @ {r['size']:>4}: median {r['median_s'] * 1000:7.1f} ms (min "
              f"{r['min_s'] * 1000:7.1f}, {r['runs']} runs) · {r['ratio_to_first']:.3f} x first · {r['graph']}")
