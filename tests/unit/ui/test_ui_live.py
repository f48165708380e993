"""The Live tab's handlers: latest frame wins, busy frames are skipped and counted, the feed, Stop."""

import time
import warnings

import gradio as gr
import numpy as np
import pytest

from fastvlm import EngineConfig, Request
from fastvlm.engine.prompt import DEFAULT_QUESTION
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision, record_questions
from ui.tab_live import FeedItem, LiveSession, counter_text, feed_html, remember, start, stop, tick


def frame(value):
    return np.full((48, 64, 3), value, np.uint8)


def make_engine(script=b"A hand.", delay=0.0):
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    return Engine(FakeVision(), FakeLM(script, delay=delay), config)


def started(**kw):
    session = LiveSession(**kw)
    start(session, 4)
    return session


def run_tick(engine, session, question="Describe briefly.", max_new_tokens=32, feed_size=20):
    return list(tick(engine, session, question, max_new_tokens, None, feed_size, every_s=0))


def test_the_latest_frame_is_answered_and_lands_in_the_feed_with_its_ttft():
    engine, session = make_engine(), started()
    for v in (10, 20, 30):
        remember(session, frame(v))
    remember(session, None)  # a dropped frame does not replace the latest
    requests = []
    stream = engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append((request, wait)) or stream(request, wait,
                                                                                                      cancel)
    updates = run_tick(engine, session)
    request, wait = requests[0]
    assert wait == 0 and int(request.image[0, 0, 0]) == 30  # never waits; the newest frame
    assert request.question == "Describe briefly."  # the person's question, not the default
    assert session.answered == 1 and session.skipped == 0
    item = session.feed[0]
    assert item.text == "A hand." and item.state == "done" and item.ttft_s > 0
    counter, feed = updates[-1]
    assert "answered 1 · skipped 0" in counter and "A hand." in feed and "TTFT" in feed


def test_start_runs_the_timer_at_the_interval_stop_halts_it_and_an_emptied_question_asks_the_default():
    session = LiveSession()
    timer, _ = start(session, 3)
    assert timer.active and timer.value == 3.0 and session.running
    assert not stop(session).active and not session.running
    engine, session = make_engine(), started()
    remember(session, frame(5))
    asked = record_questions(engine)
    run_tick(engine, session, question="")
    assert asked == [DEFAULT_QUESTION]


def test_a_frame_is_skipped_and_counted_while_the_engine_is_busy():
    engine, session = make_engine(b"x" * 200, delay=0.002), started()
    remember(session, frame(50))
    other = engine.stream(Request(frame(1), "someone else"))
    next(other)  # holds the engine
    t = time.perf_counter()
    updates = run_tick(engine, session)
    assert time.perf_counter() - t < 0.5  # no waiting, no backlog
    assert session.skipped == 1 and session.answered == 0 and session.feed == []
    assert "skipped 1" in updates[-1][0]
    other.close()
    run_tick(engine, session)  # the same frame is still the latest: answered once the engine is free
    assert session.answered == 1


def test_no_frames_warn_once_and_an_already_answered_frame_is_not_answered_again():
    engine, session = make_engine(), started()
    with pytest.warns(UserWarning, match="No camera frames"):
        run_tick(engine, session)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_tick(engine, session)  # warned already: quiet
    remember(session, frame(9))
    run_tick(engine, session)
    with pytest.warns(UserWarning, match="No camera frames"):
        run_tick(engine, session)  # the camera stopped: the same frame is not answered twice
    assert session.answered == 1


def long_answer_under_way():
    """(engine, session, the tick's generator) five parts into a 500-token answer."""
    engine, session = make_engine(b"y" * 500, delay=0.003), started()
    remember(session, frame(70))
    answering = tick(engine, session, "q", 500, None, 20, every_s=0)
    for _ in range(5):
        next(answering)
    return engine, session, answering


def test_stop_ends_the_answer_at_its_next_token_and_later_ticks_do_nothing():
    engine, session, answering = long_answer_under_way()
    stop(session)
    rest = list(answering)  # the generator notices the new run and closes the stream
    assert len(rest) <= 1 and not engine.busy
    assert session.feed[0].state == "stopped" and session.answered == 0
    remember(session, frame(80))
    assert run_tick(engine, session) == [(gr.skip(), gr.skip())]  # after Stop a late tick changes nothing
    assert session.answered == 0 and len(session.feed) == 1


def test_stop_pressed_as_a_tick_asks_the_engine_costs_no_encode_and_no_answer():
    """Stop lands after a tick saw the run going and before its request reached the engine (a thread held up on a
    busy CPU): the request ends in the engine's line, so nothing is encoded or decoded and the feed stays empty."""
    engine, session = make_engine(), started()
    remember(session, frame(40))
    stream = engine.stream

    def stopped_on_the_way(request, wait=None, cancel=None):
        stop(session)
        return stream(request, wait, cancel)

    engine.stream = stopped_on_the_way
    assert run_tick(engine, session) == [(gr.skip(), gr.skip())]
    assert engine.vision.calls == 0 and engine.lm.prefills == [] and engine.lm.evaluated == 0 and not engine.busy
    assert session.feed == [] and session.answered == 0 and session.skipped == 0


def test_stop_then_start_again_still_ends_the_earlier_runs_answer():
    """Stop and Start again in quick succession, while the earlier run's answer still streams: that answer ends
    as after a Stop alone (a new run is never taken for the old one)."""
    engine, session, answering = long_answer_under_way()
    stop(session)
    start(session, 4)
    assert len(list(answering)) <= 1 and not engine.busy
    assert session.feed[0].state == "stopped" and session.answered == 0 and session.running


def test_the_feed_is_newest_first_bounded_and_escaped():
    engine, session = make_engine(), started()
    for v in range(5):
        engine.lm.script = f"<b>answer {v}</b>".encode()
        remember(session, frame(v + 100))
        run_tick(engine, session, feed_size=3)
    assert session.answered == 5 and [i.text for i in session.feed] == [f"<b>answer {v}</b>" for v in (4, 3, 2)]
    html = feed_html(session.feed)
    assert "&lt;b&gt;answer 4&lt;/b&gt;" in html and "<b>" not in html
    items = [FeedItem("10:00:01", "old", 0.5, "done"), FeedItem("10:00:05", "new", None)]
    html = feed_html(items[::-1])
    assert html.index("new") < html.index("old") and "answering" in html and "TTFT 500 ms" in html
    assert counter_text(session) == "answered 5 · skipped 0"
