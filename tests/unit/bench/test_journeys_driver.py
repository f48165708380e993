"""The journeys' own driving and timing (`fastvlm/bench/journeys.py`) against a scripted engine: where the clock
starts and stops, where a Stop is aimed and what the run says it stopped, which camera frame a live tick answers.
Lower bounds only where real sleeps decide (a sleep never ends early); the spans between stages are 0.15 s or more."""

from __future__ import annotations

import threading
import time

import pytest

from fastvlm.bench import journeys
from fastvlm.bench.journeys import Frames, JourneySettings
from fastvlm.engine.events import Busy, Done, FirstToken, Notice, Stats, TextDelta
from ui.settings import AppSettings

STEP_S = 0.002


class ScriptedEngine:
    """`stream()`: a notice at once, `wait_s` in line (not busy), then `encode_s` and `prefill_s` of work, the
    first token, `decode_s`, Done. A cancel ends it at the next step with the stats the real engine gives (no
    encode time: stopped in the encode; no tokens: in the prefill), after `wind_down_s`. `wait=0` while busy: Busy."""

    def __init__(self, wait_s=0.0, encode_s=0.05, prefill_s=0.05, decode_s=0.05, wind_down_s=0.0, prepare_s=0.0,
                 answers=True):
        self.wait_s, self.encode_s, self.prefill_s, self.decode_s = wait_s, encode_s, prefill_s, decode_s
        self.wind_down_s, self.prepare_s, self.answers = wind_down_s, prepare_s, answers
        self.busy = False
        self._lock = threading.Lock()
        self.calls: list[tuple[str, float]] = []  # ("prepare" | "stream", when it was called)

    def prepare(self, image, size) -> bool:
        self.calls.append(("prepare", time.perf_counter()))
        time.sleep(self.prepare_s)
        return True

    def stream(self, request, wait=None, cancel=None):
        self.calls.append(("stream", time.perf_counter()))
        yield Notice("scripted")
        time.sleep(self.wait_s)
        with self._lock:
            if self.busy and wait == 0:
                raise Busy("busy")
            self.busy = True
        try:
            yield from self._work(cancel)
        finally:
            self.busy = False

    def _work(self, cancel):
        t0 = time.perf_counter()
        stages = (("encode", self.encode_s), ("prefill", self.encode_s + self.prefill_s))
        for stage, until in stages:
            while time.perf_counter() - t0 < until:
                if cancel is not None and cancel.cancelled:
                    time.sleep(self.wind_down_s)
                    encode = 0.0 if stage == "encode" else self.encode_s
                    yield Done(Stats(encode_s=encode, new_tokens=0, stop_reason="cancelled"))
                    return
                time.sleep(STEP_S)
        if not self.answers:  # a prompt that filled the context: no token
            yield Done(Stats(encode_s=self.encode_s, prefill_s=self.prefill_s, stop_reason="context_full"))
            return
        yield FirstToken(time.perf_counter() - t0)
        yield TextDelta("a")
        time.sleep(self.decode_s)
        yield Done(Stats(encode_s=self.encode_s, prefill_s=self.prefill_s, new_tokens=2, stop_reason="max_tokens"))


def test_the_first_token_is_timed_from_the_submit_to_the_first_token_not_the_first_event():
    engine = ScriptedEngine(encode_s=0.1, prefill_s=0.05, decode_s=0.2)
    t_submit = time.perf_counter()
    row = journeys._first_token_after(engine, journeys._request(None, 512, 8), t_submit)
    assert row["ttft_s"] >= 0.15  # not the notice that came at once
    assert 0.2 <= row["end_s"] - row["ttft_s"] < 3  # the decode after it
    assert (row["encode_s"], row["prefill_s"]) == (0.1, 0.05)


def test_an_answer_without_a_token_is_timed_to_its_end():
    engine = ScriptedEngine(encode_s=0.1, prefill_s=0.1, answers=False)
    row = journeys._first_token_after(engine, journeys._request(None, 512, 8), time.perf_counter())
    assert 0.2 <= row["ttft_s"] <= row["end_s"] < 3


def test_an_early_question_is_asked_while_the_upload_is_still_prepared():
    engine = ScriptedEngine(prepare_s=0.4)
    row = journeys.prepare_then_ask(engine, Frames(), 128, delay_s=0.15, max_tokens=8)
    (first, t_prepare), (second, t_ask) = engine.calls
    assert (first, second) == ("prepare", "stream")
    assert 0.14 <= t_ask - t_prepare < 0.4  # `delay_s` after the upload (its thread starts a little later)
    assert row["prepared"] and row["prepare_s"] >= 0.4


@pytest.mark.parametrize("at", ["encode", "prefill"])
def test_a_stop_is_aimed_half_way_through_its_stage_and_says_where_it_landed(at):
    engine = ScriptedEngine(wait_s=0.3, encode_s=0.3, prefill_s=0.3, decode_s=0.0, wind_down_s=0.05)
    row = journeys.stop(engine, Frames(), 128, at, {"encode_s": 0.3, "prefill_s": 0.3}, 8)
    # aimed 0.15 s into the encode, 0.45 s into the work (0.15 into the prefill), counted once the engine is busy
    assert row == {"aimed_at": at, "stopped_in": at, "to_idle_s": row["to_idle_s"], "idle": True}
    assert 0.05 <= row["to_idle_s"] < 0.8  # from the cancel to the engine free: its 0.05 s wind-down, polled


def test_a_stop_after_the_answer_ended_says_so():
    engine = ScriptedEngine(encode_s=0.02, prefill_s=0.02, decode_s=0.0)
    row = journeys.stop(engine, Frames(), 128, "prefill", {"encode_s": 0.2, "prefill_s": 0.2}, 8)
    assert row["stopped_in"] == "after" and row["idle"]


def test_live_ticks_answer_the_cameras_latest_frame():
    assert journeys.CAMERA_EVERY_S == AppSettings().frame_every_s  # the rate the tab's webcam sends at
    engine = ScriptedEngine(encode_s=0.02, prefill_s=0.02, decode_s=0.02)
    settings = JourneySettings(live_s=1.4, cadence_s=0.7, live_max_tokens=8)
    out = journeys.live(engine, Frames(), 128, settings)
    assert out["offered"] == 2 and out["skipped"] == 0 and len(out["answered_runs"]) == 2
    for row in out["answered_runs"]:
        # the tick at 0.7 s answers the frame of 0.5 s; the first, the frame sent as it began
        waited = row["lag_s"] - row["end_s"]
        assert 0 <= waited < journeys.CAMERA_EVERY_S, row
        assert row["lag_first_token_s"] - row["ttft_s"] == pytest.approx(waited)
    assert max(r["lag_s"] - r["end_s"] for r in out["answered_runs"]) >= 0.15  # the second tick's 0.2 s


def test_live_offers_one_tick_at_least_and_skips_a_tick_while_busy():
    short = JourneySettings(live_s=0.3, cadence_s=0.7, live_max_tokens=8)
    assert journeys.live(ScriptedEngine(), Frames(), 128, short)["offered"] == 1
    slow = ScriptedEngine(encode_s=0.5, prefill_s=0.3, decode_s=0.0)
    out = journeys.live(slow, Frames(), 128, JourneySettings(live_s=1.0, cadence_s=0.5, live_max_tokens=8))
    assert (out["offered"], out["skipped"], len(out["answered_runs"])) == (2, 1, 1)
