"""bench --plot's picture, read back pixel by pixel: the cold TTFT histogram's bars in proportion to their counts,
and each run kind's stage bar in proportion to its median stage times."""

from __future__ import annotations

import numpy as np
from PIL import Image

from fastvlm.bench.plot import H, PAD, STAGES, W, draw

BLUE = (66, 133, 244)  # the histogram's bars (and the encode stage's)
FULL = H - PAD - 40 - 30  # the tallest bar's height above the axis (the axis line covers its bottom row)


def _record(kind: str, ttft: float, pre: float = 0.0, enc: float = 0.0, fill: float = 0.0) -> dict:
    return {"kind": kind, "ttft_s": ttft, "preprocess_s": pre, "encode_s": enc, "prefill_s": fill}


def _pixels(records: list[dict], tmp_path) -> np.ndarray:
    path = draw(records, tmp_path / "perf" / "plots" / "p.png", "title")  # its folders made
    return np.asarray(Image.open(path).convert("RGB"))


def _histogram_heights(px: np.ndarray) -> list[int]:
    """The blue run's height in the middle column of each of the 12 bins."""
    x0, x1, bins = PAD, W // 2 - 20, 12
    columns = [int(x0 + (i + 0.5) * (x1 - x0) / bins) for i in range(bins)]
    return [int(np.all(px[:, x] == BLUE, axis=1).sum()) for x in columns]


def test_the_histogram_counts_cold_runs_only(tmp_path):
    records = [_record("cold", t) for t in (1.0, 1.0, 1.0, 1.05, 2.0)] + [_record("warm", 9.0)] * 5
    heights = _histogram_heights(_pixels(records, tmp_path))
    assert heights[0] == FULL and heights[-1] == FULL / 4  # 4 runs in 1.0-1.083, 1 at 2.0
    assert heights[1:-1] == [0] * 10


def test_without_cold_runs_every_run_counts(tmp_path):
    heights = _histogram_heights(_pixels([_record("warm", 0.5), _record("warm", 0.5)], tmp_path))
    assert heights[0] == FULL and heights[1:] == [0] * 11  # one value: one full bar, no division by zero


def _bar_widths(px: np.ndarray, row: int) -> list[int]:
    """How many pixels of each stage's colour the stage panel's `row` holds."""
    panel = px[row, W // 2 + 20:]
    return [int(np.all(panel == colour, axis=1).sum()) for _, colour in STAGES]


def test_stage_bars_show_medians_to_one_scale(tmp_path):
    records = [_record("cold", 1, 0.1, 0.6, 0.3), _record("cold", 1, 0.1, 0.2, 0.1), _record("cold", 1, 0.1, 0.4, 0.2),
               _record("follow-up", 1, 0.0, 0.0, 0.25), _record("follow-up", 1, 0.0, 0.0, 0.15)]
    px = _pixels(records, tmp_path)
    n, y0, y1 = 2, 40, H - PAD
    bar_h = min(40, (y1 - y0 - 60) / n - 10)
    rows = [int(y0 + 30 + i * (bar_h + 24) + bar_h / 2) for i in range(n)]  # kinds sorted: cold, follow-up
    span = W - PAD - (W // 2 + 20) - 90  # the longest bar's length (cold: 0.1 + 0.4 + 0.2 = 0.7 s)
    cold, follow = _bar_widths(px, rows[0]), _bar_widths(px, rows[1])
    for got, want in zip(cold, (0.1, 0.4, 0.2)):
        assert abs(got - span * want / 0.7) <= 2, (cold, span)
    assert follow[:2] == [0, 0] and abs(follow[2] - span * 0.2 / 0.7) <= 2, follow  # median of two: their mean
