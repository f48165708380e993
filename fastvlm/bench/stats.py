"""Summaries of repeated timings, and the machine they were measured on."""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
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


def host_clock() -> tuple[float | None, float]:
    """(CPU seconds the hypervisor gave other guests on this machine's cores since boot, all cores together, or None
    where the system does not say; now): the start of `stolen_since`."""
    import psutil

    return getattr(psutil.cpu_times(), "steal", None), time.monotonic()


def stolen_since(start: tuple[float | None, float]) -> dict:
    """The CPU time taken from this (virtual) machine since `host_clock()` gave `start`: seconds, and their share of
    all its cores' time. On a shared host a run can slow down by half with no load of its own to show for it."""
    steal, then = host_clock()
    if steal is None or start[0] is None:
        return {"cpu_steal_s": None, "cpu_steal_share": None}
    stolen = steal - start[0]
    return {"cpu_steal_s": round(stolen, 2),
            "cpu_steal_share": round(stolen / max((then - start[1]) * (os.cpu_count() or 1), 1e-9), 4)}


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
