"""The browser bench's engine wrapper (which requests the page's walks count as answered) and its Chromium check."""

from __future__ import annotations

import pytest

from fastvlm.bench.browser import serve
from fastvlm.engine.events import Busy, Done, TextDelta


class Engine:
    """Answers with one delta and Done("stats N"), or raises Busy when `busy_next`; records prepare calls."""

    def __init__(self):
        self.busy, self.busy_next, self.prepared, self.closed, self.n = False, False, [], 0, 0
        self.other = "passed through"

    def prepare(self, image, resolution=None, words="", history=(), image_with_question=False):
        self.prepared.append((image, resolution, words, history))
        return True

    def stream(self, request, wait=None, cancel=None):
        assert (request, wait, cancel) == ("req", 1.0, "token")
        if self.busy_next:
            raise Busy("busy")
        self.n += 1
        try:
            yield TextDelta("a")
            yield Done(f"stats {self.n}")
            yield TextDelta("after")  # never read: the page's reader stops at Done
        finally:
            self.closed += 1


def test_answers_are_recorded_with_their_stats_and_busy_ones_are_not_counted(monkeypatch):
    clock = iter([10.0, 20.0, 30.0])
    monkeypatch.setattr(serve.time, "time", lambda: next(clock))
    inner = Engine()
    engine = serve.RecordingEngine(inner)
    events = []
    for event in engine.stream("req", 1.0, "token"):
        events.append(event)
        if isinstance(event, Done):
            break
    assert events == [TextDelta("a"), Done("stats 1")] and inner.closed == 1
    inner.busy_next = True
    with pytest.raises(Busy):
        list(engine.stream("req", 1.0, "token"))
    inner.busy_next = False
    left = engine.stream("req", 1.0, "token")
    next(left)
    left.close()  # a reader who left before Done: asked, not answered
    assert inner.closed == 2
    assert [(r["at"], r["busy"], r["stats"]) for r in engine.requests] == \
        [(10.0, False, "stats 1"), (20.0, True, None), (30.0, False, None)]
    assert engine.answered_since(10.0) == engine.requests[:1] and engine.answered_since(10.5) == []


def test_prepare_is_refused_on_demand_and_the_rest_passes_through():
    inner = Engine()
    engine = serve.RecordingEngine(inner)
    assert engine.prepare("img", 512, words="hi", history=("t",)) is True
    assert inner.prepared == [("img", 512, "hi", ("t",))]
    engine.refuse_prepare = True
    assert engine.prepare("img", 512) is False and len(inner.prepared) == 1
    inner.busy = True
    assert engine.busy and engine.other == "passed through"


def test_a_missing_chromium_is_named_with_its_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(serve, "CHROMIUM", tmp_path / "no-chromium")
    with pytest.raises(serve.BrowserUnavailable, match="apt-get install chromium .*CHROMIUM="):
        serve.sync_playwright()
