"""The engine is free when a stream's last event (`Done`) is read, not when its reader asks past it: Gradio may
never ask again once Stop cancelled the event, and then the engine stayed busy until Gradio closed the stream
(scripted models)."""

import threading

from fastvlm import Done, Request
from fastvlm.engine.cancel import CancelToken
from tests.unit.engine.test_engine import IMG, make, slow_prefix_engine


def test_an_answer_frees_the_engine_by_the_time_its_done_is_read():
    engine, _ = make()
    events = engine.stream(Request(IMG, "q"))
    done = next(e for e in events if isinstance(e, Done))
    assert done.stats.stop_reason != "cancelled" and not engine.busy
    assert list(events) == []  # nothing follows it


def test_a_stop_in_the_prefill_frees_the_engine_by_the_time_its_done_is_read():
    engine, lm = slow_prefix_engine()
    token = CancelToken()
    events = engine.stream(Request(IMG, "q"), cancel=token)
    threading.Timer(0.1, token.cancel).start()  # Stop, while the image's positions are prefilled
    done = next(e for e in events if isinstance(e, Done))
    assert done.stats.stop_reason == "cancelled" and not engine.busy
    assert lm.prefills and done.stats.encode_s > 0  # it was in the prefill


def test_a_request_cancelled_while_in_line_frees_its_turn_by_its_done():
    engine, _ = make()
    token = CancelToken()
    token.cancel()
    events = engine.stream(Request(IMG, "q"), cancel=token)
    assert isinstance(next(events), Done) and not engine.busy
