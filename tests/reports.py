"""Checks shared by the tests of the bench's JSON reports."""

from __future__ import annotations

import math
from collections.abc import Iterator


def seconds(report, path: str = "") -> Iterator[tuple[str, float]]:
    """(path, value) for every number the report keeps under a key ending in `_s`, rates (`…_per_s`) aside."""
    if isinstance(report, dict):
        for key, value in report.items():
            yield from seconds(value, f"{path}/{key}")
    elif isinstance(report, list):
        for i, value in enumerate(report):
            yield from seconds(value, f"{path}[{i}]")
    elif isinstance(report, (int, float)) and not isinstance(report, bool) and path.endswith("_s") \
            and not path.endswith("_per_s"):
        yield path, report


def odd_spans(report, signed: tuple[str, ...] = (), limit_s: float = 120.0) -> dict[str, float]:
    """The times in `report` that are no span of a quick run: below 0 or past `limit_s` (a sum of two clock
    readings, ~1e9 s on the wall clock, or a lost minus sign). Keys containing one of `signed` are differences
    that may fall a little below 0 (down to -`limit_s`). NaN is the bench's "not measured" (a median of nothing,
    e.g. no first sound read off the page), never the result of clock arithmetic: passed over."""
    return {path: v for path, v in seconds(report)
            if not math.isnan(v) and not (-limit_s if any(s in path for s in signed) else 0) <= v < limit_s}
