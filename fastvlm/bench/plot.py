"""A PNG of the TTFT distribution and the per-stage breakdown, drawn with PIL (no plotting library)."""

from __future__ import annotations

import statistics
from pathlib import Path

from PIL import Image, ImageDraw

STAGES = (("preprocess_s", (120, 144, 156)), ("encode_s", (66, 133, 244)), ("prefill_s", (244, 160, 0)))
W, H, PAD = 900, 420, 50


def draw(records: list[dict], path: Path, title: str) -> Path:
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    d.text((PAD, 12), title, fill="black")
    kinds = sorted({r["kind"] for r in records})
    cold = [r["ttft_s"] for r in records if r["kind"] == "cold"]
    _histogram(d, cold or [r["ttft_s"] for r in records], (PAD, 40, W // 2 - 20, H - PAD))
    _stages(d, records, kinds, (W // 2 + 20, 40, W - PAD, H - PAD))
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def _histogram(d: ImageDraw.ImageDraw, values: list[float], box) -> None:
    x0, y0, x1, y1 = box
    d.text((x0, y0), "cold TTFT distribution (s)", fill="black")
    if not values:
        return
    lo, hi = min(values), max(values)
    bins = 12
    width = (hi - lo) / bins or 1e-9
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1)] += 1
    top, bw = max(counts), (x1 - x0) / bins
    for i, c in enumerate(counts):
        h = (y1 - y0 - 30) * c / top
        d.rectangle((x0 + i * bw + 1, y1 - h, x0 + (i + 1) * bw - 1, y1), fill=(66, 133, 244))
    d.line((x0, y1, x1, y1), fill="black")
    d.text((x0, y1 + 6), f"{lo:.3f}", fill="black")
    d.text((x1 - 40, y1 + 6), f"{hi:.3f}", fill="black")


def _stages(d: ImageDraw.ImageDraw, records: list[dict], kinds: list[str], box) -> None:
    x0, y0, x1, y1 = box
    d.text((x0, y0), "median stage times per run kind (s)", fill="black")
    med = {k: {s: statistics.median(r[s] for r in records if r["kind"] == k) for s, _ in STAGES} for k in kinds}
    scale = max((sum(m.values()) for m in med.values()), default=1) or 1
    bar_h = min(40, (y1 - y0 - 60) / max(len(kinds), 1) - 10)
    for i, k in enumerate(kinds):
        y = y0 + 30 + i * (bar_h + 24)
        d.text((x0, y), k, fill="black")
        x = x0 + 80
        for stage, colour in STAGES:
            w = (x1 - x0 - 90) * med[k][stage] / scale
            d.rectangle((x, y, x + w, y + bar_h), fill=colour)
            x += w
        d.text((x + 4, y), f"{sum(med[k].values()):.3f}", fill="black")
    for j, (stage, colour) in enumerate(STAGES):
        d.rectangle((x0 + j * 120, y1 - 12, x0 + j * 120 + 10, y1 - 2), fill=colour)
        d.text((x0 + j * 120 + 14, y1 - 14), stage[:-2], fill="black")

