"""Many requests back to back (new images, follow-ups, cancellations): does memory or disk leak?"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass

from ..engine.config import GenerationOptions
from ..engine.events import Request, TextDelta, Turn
from .runs import fresh

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SoakReport:
    requests: int
    rss_start_mib: float
    rss_end_mib: float
    peak_rss_mib: float
    cancelled: int
    temp_files_left: tuple[str, ...]

    @property
    def rss_growth(self) -> float:
        return self.rss_end_mib / self.rss_start_mib - 1


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def soak(engine, images, n: int, size: int, max_tokens: int = 24) -> SoakReport:
    opts = GenerationOptions(max_new_tokens=max_tokens)
    tmp_before = set(os.listdir(tempfile.gettempdir()))
    warm = min(20, n // 10)
    rss_start = peak = _rss_mib()
    cancelled = 0
    last = None
    for i in range(n):
        if i == warm:
            rss_start = _rss_mib()  # after the caches have filled once
        kind = i % 4
        if kind == 1 and last is not None:  # follow-up on the previous image
            img, turn = last
            engine.answer(Request(img, "And then?", history=(turn,), options=opts, resolution=size))
        elif kind == 3:  # a reader who leaves mid-answer
            stream = engine.stream(Request(fresh(images[i % len(images)], i), "Describe.", options=opts,
                                           resolution=size))
            for ev in stream:
                if isinstance(ev, TextDelta):
                    break
            stream.close()
            cancelled += 1
        else:
            img = fresh(images[i % len(images)], i)
            r = engine.answer(Request(img, "What is this?", options=opts, resolution=size))
            last = (img, Turn("What is this?", r.text))
        peak = max(peak, _rss_mib())
        if (i + 1) % 50 == 0:
            log.info("soak %d/%d: rss %.0f MiB", i + 1, n, _rss_mib())
    left = tuple(sorted(set(os.listdir(tempfile.gettempdir())) - tmp_before))
    return SoakReport(n, rss_start, _rss_mib(), peak, cancelled, left)
