"""ReadAhead: an engine stream goes on while its reader (a page update) is slow, and stops when it is closed."""

import threading
import time

import numpy as np
import pytest

from fastvlm.engine.cancel import CancelToken
from fastvlm.engine.events import Request
from ui.readahead import ReadAhead
from ui.widgets import follow

from .test_ui_widgets import make_engine


def source(n, made, closed, delay=0.0, fail_at=None):
    """Yields n events, stamping when each was made; `closed` is set when the generator is finished or closed."""
    try:
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"broken at {i}")
            time.sleep(delay)
            made.append(time.perf_counter())
            yield i
    finally:
        closed.set()


def test_the_stream_is_read_while_the_reader_is_busy():
    made, closed = [], threading.Event()
    read = []
    for item in ReadAhead(source(5, made, closed, delay=0.01)):
        read.append((item, time.perf_counter()))
        time.sleep(0.1)  # a slow page update
    assert [i for i, _ in read] == [0, 1, 2, 3, 4]
    # read straight through, event 4 would be made after event 3 was read and updated (~0.1 s later)
    assert made[4] < read[2][1], "the stream waited for its reader"
    assert closed.is_set()


def test_closing_early_stops_the_stream_cancels_its_token_and_returns_when_it_has_stopped():
    made, closed, token = [], threading.Event(), CancelToken()
    ahead = ReadAhead(source(10_000, made, closed, delay=0.001), token)
    assert next(ahead) == 0
    ahead.close()
    assert closed.is_set() and token.cancelled
    assert len(made) < 10_000
    with pytest.raises(StopIteration):
        next(ahead)


def test_a_stream_read_to_its_end_does_not_cancel_and_errors_arrive_after_the_events_before_them():
    token = CancelToken()
    ahead = ReadAhead(source(3, [], threading.Event()), token)
    assert list(ahead) == [0, 1, 2]
    ahead.close()  # after the end: nothing to stop
    assert not token.cancelled
    with pytest.raises(StopIteration):
        next(ahead)
    ahead = ReadAhead(source(5, [], threading.Event(), fail_at=2))
    assert [next(ahead), next(ahead)] == [0, 1]
    with pytest.raises(ValueError, match="broken at 2"):
        next(ahead)


def test_follow_decodes_while_the_page_updates_and_closing_it_frees_the_engine():
    engine = make_engine(b"x" * 200, delay=0.005)
    image = np.full((32, 48, 3), 200, np.uint8)
    token = CancelToken()
    parts = follow(engine.stream(Request(image, "q"), cancel=token), every_s=0, cancel=token, read_ahead=True)
    next(parts)
    time.sleep(0.3)  # the page is slow: the engine decodes on meanwhile, and the next update has all of it
    assert len(next(parts).text) > 20
    parts.close()
    assert not engine.busy and token.cancelled



def test_the_stream_is_read_in_a_thread_that_cannot_hold_the_app_open():
    daemon = []

    def events():
        daemon.append(threading.current_thread().daemon)
        yield 1

    assert list(ReadAhead(events())) == [1] and daemon == [True]
