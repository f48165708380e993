"""bench --soak's mix of requests on a recording engine: new images, follow-ups on the previous answer, readers who
leave mid-answer; memory measured after the warm-up, temp files the run left behind found."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from fastvlm.bench import soak as soak_mod
from fastvlm.engine.events import TextDelta, Turn


@dataclass
class Recorded:
    how: str  # "answer" | "stream"
    request: object
    read: int = 0  # deltas taken from a stream
    closed: bool = False


class RecordingEngine:
    """Answers "answer N"; a stream gives three deltas; `leave_file` makes a temp file on that request."""

    def __init__(self, leave_file_at: int | None = None):
        self.calls: list[Recorded] = []
        self.leave_file_at = leave_file_at
        self.made: list[str] = []

    def _count(self) -> None:
        if len(self.calls) - 1 == self.leave_file_at:
            self.made.append(tempfile.NamedTemporaryFile(prefix="soak-test-", delete=False).name)

    def answer(self, request):
        self.calls.append(Recorded("answer", request))
        self._count()
        return SimpleNamespace(text=f"answer {len(self.calls) - 1}")

    def stream(self, request):
        rec = Recorded("stream", request)
        self.calls.append(rec)
        self._count()

        def gen():
            try:
                for piece in ("a", "b", "c"):
                    rec.read += 1
                    yield TextDelta(piece)
            finally:
                rec.closed = True

        return gen()


@pytest.fixture(autouse=True)
def own_temp_dir(monkeypatch, tmp_path):
    """A temp folder of the test's own, so no other process's files count as left behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _images() -> list[Image.Image]:
    return [Image.fromarray(np.full((8, 8, 3), v, np.uint8)) for v in (10, 200)]


def test_the_mix_new_follow_up_new_leave(monkeypatch):
    monkeypatch.setattr(soak_mod, "_rss_mib", lambda: 100.0)
    engine = RecordingEngine()
    report = soak_mod.soak(engine, _images(), 8, size=256, max_tokens=5)
    assert [c.how for c in engine.calls] == ["answer", "answer", "answer", "stream"] * 2
    first, follow = engine.calls[0].request, engine.calls[1].request
    assert follow.image is first.image and follow.history == (Turn("What is this?", "answer 0"),)
    assert engine.calls[5].request.history == (Turn("What is this?", "answer 4"),)
    assert all(c.request.resolution == 256 and c.request.options.max_new_tokens == 5 for c in engine.calls)
    for c in engine.calls[3], engine.calls[7]:  # the reader who leaves: one delta, then the stream is closed
        assert c.read == 1 and c.closed
    new = [c.request.image for c in engine.calls if not c.request.history]
    assert len({im.tobytes() for im in new}) == len(new) == 6  # every new request a picture no cache knows
    assert report.requests == 8 and report.cancelled == 2 and report.temp_files_left == ()


def test_memory_is_counted_from_after_the_warm_up(monkeypatch):
    engine = RecordingEngine()
    readings = iter(range(1000))  # MiB, one more at each reading

    def rss() -> float:
        return float(100 + next(readings))

    monkeypatch.setattr(soak_mod, "_rss_mib", rss)
    report = soak_mod.soak(engine, _images(), 40, size=128)
    # reading 0 the first start; 1-4 the warm-up's peaks; 5 the start again at the 5th request (warm = 40 // 10),
    # then its peak; 41 the last request's peak, 42 the end
    assert (report.rss_start_mib, report.peak_rss_mib, report.rss_end_mib) == (105, 141, 142)
    assert report.rss_growth == 142 / 105 - 1


def test_a_temp_file_left_by_a_request_is_reported(monkeypatch):
    monkeypatch.setattr(soak_mod, "_rss_mib", lambda: 50.0)
    engine = RecordingEngine(leave_file_at=2)
    report = soak_mod.soak(engine, _images(), 4, size=128)
    assert [os.path.join(tempfile.gettempdir(), name) for name in report.temp_files_left] == engine.made


def test_a_long_soak_warms_up_for_20_requests_and_memory_is_in_mib(monkeypatch):
    assert 10 < soak_mod._rss_mib() < 2**20  # this Python process: more than 10 MiB, less than a TiB
    readings = iter(range(1000))
    monkeypatch.setattr(soak_mod, "_rss_mib", lambda: float(next(readings)))
    assert soak_mod.soak(RecordingEngine(), _images(), 300, size=128).rss_start_mib == 21  # after 20 requests
