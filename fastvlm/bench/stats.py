"""Summaries of repeated timings, and the machine they were measured on."""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
from importlib import metadata

from ..engine.cpu import cpu_id, cpu_model, features


def summarize(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    p90 = ordered[math.ceil(0.9 * len(ordered)) - 1]  # nearest rank: at least 90 % of the values are <= it
    return {
        "n": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "min": ordered[0],
        "max": ordered[-1],
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "p90": p90,
    }


def positive_int(text: str) -> int:
    """An argparse type: a count of runs, at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


PACKAGES = ("llama-cpp-python", "onnxruntime", "openvino", "numpy", "pillow")


def machine_info(threads: int, packages: tuple[str, ...] = PACKAGES) -> dict:
    """The CPU, cores, memory, Python and the installed versions of `packages` (missing ones left out)."""
    import psutil

    versions = {}
    for pkg in packages:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return {
        "cpu": cpu_model(),
        "cpu_id": cpu_id(),  # vendor, family, model, stepping: "AMD EPYC" alone does not say which generation
        "cpu_features": features(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "threads": threads,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
    }


def write_report(path, report: dict) -> None:
    """The JSON report (`--report-json`), its folder made if needed."""
    import json
    from pathlib import Path

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))
