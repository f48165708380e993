"""Single flight over HTTP: one answer at a time, waiting or 503, and clients that leave free the engine."""

import itertools
import threading
import time

import httpx
import openai
import pytest

from fastvlm import Busy, Request, TextDelta
from fastvlm.remote import RemoteEngine, RemoteError
from tests.fakes import FakeLM
from tests.unit.api.test_api_server import IMAGE, IMG, URL, client, make_engine, msgs, post, serve


class SeedLM(FakeLM):
    """Answers `<seed>` repeated, slowly, and records when each generation ran."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.spans: list[tuple[float, float]] = []

    def generate(self, options, seed=0):
        self.script = (f"<{seed}>" * 6).encode()
        t = time.perf_counter()
        try:
            yield from super().generate(options, seed)
        finally:
            self.spans.append((t, time.perf_counter()))


def run_threads(engine, first, *more):
    """Run `first`, then, once it holds the engine, the others; each thread's result or exception."""
    results = [None] * (1 + len(more))

    def call(i, fn):
        try:
            results[i] = fn()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            results[i] = e

    threads = [threading.Thread(target=call, args=(i, fn)) for i, fn in enumerate((first, *more))]
    threads[0].start()
    deadline = time.monotonic() + 5
    while not engine.busy and time.monotonic() < deadline:
        time.sleep(0.002)
    for t in threads[1:]:
        t.start()
    for t in threads:
        t.join(timeout=20)
    return results


def ask(server, seed, stream=False):
    def go():
        r = client(server).chat.completions.create(model="fastvlm", messages=msgs(IMAGE), seed=seed, stream=stream)
        return "".join(c.choices[0].delta.content or "" for c in r) if stream else r.choices[0].message.content
    return go


def test_a_second_client_waits_its_turn_and_answers_never_mix():
    engine, lm = make_engine(SeedLM(delay=0.005))
    with serve(engine, queue_wait_s=10) as server:
        results = run_threads(engine, ask(server, 1, stream=True), ask(server, 2), ask(server, 3, stream=True))
    assert results == ["<1>" * 6, "<2>" * 6, "<3>" * 6]
    spans = sorted(lm.spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), "two generations overlapped"


def test_a_client_that_waits_too_long_gets_a_503_with_retry_after():
    engine, lm = make_engine(SeedLM(delay=0.03))  # ~0.6 s an answer
    with serve(engine, queue_wait_s=0.1, retry_after_s=7) as server:
        first, second = run_threads(engine, ask(server, 1, stream=True), ask(server, 2))
        assert first == "<1>" * 6
        assert isinstance(second, openai.APIStatusError) and second.status_code == 503
        assert second.response.headers["retry-after"] == "7" and second.body["code"] == "engine_busy"
        _, busy = run_threads(engine, ask(server, 3, stream=True),
                              lambda: RemoteEngine(server.url).answer(Request(IMG)))
        assert isinstance(busy, Busy)  # the remote engine turns the 503 into the engine's Busy
    assert len(lm.spans) == 2


def test_requests_beyond_max_waiting_are_refused_at_once():
    engine, _ = make_engine(SeedLM(delay=0.02))
    with serve(engine, queue_wait_s=10, max_waiting=0) as server:
        first, second = run_threads(engine, ask(server, 1, stream=True), ask(server, 2))
    assert first == "<1>" * 6 and isinstance(second, openai.APIStatusError) and second.status_code == 503
    assert "already running or waiting" in second.message


def test_a_client_may_ask_not_to_wait():
    lm = SeedLM(delay=0.05)
    engine, _ = make_engine(lm)
    with serve(engine, queue_wait_s=10) as server:
        def no_wait():
            r = post(server, {"messages": msgs(IMAGE), "queue_wait_s": 0})
            return r.status_code, time.perf_counter()

        def remote_no_wait():  # what the UI's live tab does each tick
            with pytest.raises(Busy):
                next(RemoteEngine(server.url).stream(Request(IMG), wait=0))
            return time.perf_counter()

        first, (status, refused_at), remote_refused_at = run_threads(engine, ask(server, 1, stream=True), no_wait,
                                                                     remote_no_wait)
    assert first == "<1>" * 6 and status == 503
    answered_at = lm.spans[0][1]  # refused while the running answer still ran, not after waiting for it
    assert refused_at < answered_at and remote_refused_at < answered_at, (refused_at, remote_refused_at, lm.spans)


def wait_idle(engine, timeout=3.0):
    deadline = time.monotonic() + timeout
    while engine.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    return not engine.busy


def test_a_client_leaving_a_stream_frees_the_engine():
    engine, lm = make_engine(script=b"x" * 500, delay=0.01)
    body = {"messages": msgs(IMAGE), "stream": True}
    with serve(engine) as server:
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body) as r:
            lines = r.iter_lines()
            next(lines)
            assert engine.busy
            prepared = httpx.post(server.url + "/v1/prepare", json={"image_url": URL}, timeout=2)
            assert prepared.json() == {"prepared": False}  # never waits, never runs beside an answer
            next(lines)  # the stream goes on
            assert engine.busy
        assert wait_idle(engine, timeout=1.0) and lm.evaluated < 100
        remote = RemoteEngine(server.url)
        events = remote.stream(Request(IMG, "q"))
        assert isinstance(next(e for e in events if isinstance(e, TextDelta)), TextDelta) and remote.busy
        events.close()
        assert not remote.busy and wait_idle(engine, timeout=1.0)
        before = lm.evaluated
        with pytest.raises(httpx.ReadTimeout):  # a non-streaming client that gives up frees it too
            post(server, {"messages": msgs(IMAGE)}, timeout=0.3)
        assert wait_idle(engine, timeout=1.0) and lm.evaluated - before < 100  # 256 tokens would take 2.5 s


class FailingLM(FakeLM):
    def generate(self, options, seed=0):
        yield from b"ab"
        raise RuntimeError("the language model broke")


def test_an_error_mid_stream_is_reported_in_band_and_frees_the_engine(caplog):
    engine, _ = make_engine(FailingLM())
    with serve(engine) as server:
        with pytest.raises(openai.APIError, match="internal error"):
            list(client(server).chat.completions.create(model="fastvlm", messages=msgs(IMAGE), stream=True))
        with pytest.raises(RemoteError, match="failed while answering"):
            RemoteEngine(server.url).answer(Request(IMG))
        assert post(server, {"messages": msgs(IMAGE)}).status_code == 500
        assert not engine.busy and "the language model broke" in caplog.text


def test_a_clients_longer_queue_wait_is_capped_by_the_servers():
    lm = SeedLM(delay=0.1)  # ~2 s an answer
    engine, _ = make_engine(lm)
    with serve(engine, queue_wait_s=0.2) as server:
        def patient():
            t = time.perf_counter()
            r = post(server, {"messages": msgs(IMAGE), "queue_wait_s": 30})
            return r.status_code, time.perf_counter() - t, time.perf_counter()

        first, (status, waited, refused_at) = run_threads(engine, ask(server, 1, stream=True), patient)
    assert first == "<1>" * 6 and status == 503
    assert waited < 1 and refused_at < lm.spans[0][1], (waited, refused_at, lm.spans)  # not when the engine was free
