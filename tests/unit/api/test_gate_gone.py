"""A client that gives up before its answer begins costs no encode and no prefill (issue #20 item 7): `Gate.open`
watches `gone()` while it waits in line and while the first event (encode, prefill) is being made; closing the
events frees the place once and stops the step in flight."""

from __future__ import annotations

import threading
import time

import anyio
import numpy as np
import pytest

from fastvlm import EngineConfig, Request
from fastvlm.api.settings import ApiSettings
from fastvlm.api.streaming import EngineEvents, Gate
from fastvlm.engine.cancel import CancelToken
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import Done, TextDelta
from fastvlm.engine.vision import EncodeCancelled
from tests.fakes import FakeLM, FakeVision


class EncodeUntilCancelled(FakeVision):
    """An encode that runs until the runtime's `cancel()` (as ONNX Runtime's terminate does), at most 10 s."""

    def __init__(self):
        super().__init__()
        self._stop = threading.Event()

    def encode(self, pixels):
        self.calls += 1
        if not self._stop.wait(10):
            raise AssertionError("the encode ran to its end: nobody cancelled it")
        raise EncodeCancelled()

    def cancel(self):
        self._stop.set()


def _gone_after(seconds: float):
    t0 = time.monotonic()

    async def gone() -> bool:
        return time.monotonic() - t0 > seconds
    return gone


def _open(engine, gone, wait=None):
    async def main():
        gate = Gate(engine, ApiSettings())
        t0 = time.monotonic()
        events = await gate.open(Request(np.zeros((8, 8, 3), np.uint8), "q"), wait, gone=gone)
        first = await events.__anext__()
        await events.aclose()
        return first, time.monotonic() - t0, gate._admitted
    return anyio.run(main)


def _engine(vision):
    return Engine(vision, FakeLM(b"never"), EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1))


def test_a_client_that_leaves_during_the_encode_stops_it():
    vision = EncodeUntilCancelled()
    engine = _engine(vision)
    first, took, admitted = _open(engine, _gone_after(0.2))
    assert isinstance(first, Done) and first.stats.stop_reason == "cancelled"
    assert took < 3 and vision.calls == 1 and admitted == 0 and not engine.busy


def test_a_client_that_leaves_while_in_line_costs_no_encode():
    vision = FakeVision()
    engine = _engine(vision)
    engine._flight.lock.acquire()  # another answer holds the engine
    try:
        first, took, admitted = _open(engine, _gone_after(0.2), wait=30)
    finally:
        engine._flight.lock.release()
    assert isinstance(first, Done) and first.stats.stop_reason == "cancelled"
    assert took < 3 and vision.calls == 0 and admitted == 0


def test_a_cancelled_call_stops_the_encode_it_waits_for():
    """An MCP call the client cancels: the handler task is cancelled while the first event is being made."""
    vision = EncodeUntilCancelled()
    engine = _engine(vision)

    async def main():
        gate = Gate(engine, ApiSettings())
        with anyio.move_on_after(0.2):  # as McpServer.answer: open, read, always close
            events = await gate.open(Request(np.zeros((8, 8, 3), np.uint8), "q"))
            try:
                async for _ in events:
                    pass
            finally:
                await events.aclose()
        return gate._admitted

    t0 = time.monotonic()
    admitted = anyio.run(main)
    assert time.monotonic() - t0 < 3 and vision.calls == 1 and vision._stop.is_set()
    assert admitted == 0 and not engine.busy


def test_a_client_that_leaves_is_noticed_within_a_few_tenths_of_a_second():
    vision = EncodeUntilCancelled()
    first, took, _ = _open(_engine(vision), _gone_after(0.3))  # asked at once, then every GONE_POLL_S
    assert isinstance(first, Done) and 0.3 <= took < 0.9


def recorded(closed: list[str], *texts: str):
    """The engine's events for `texts`, noting in `closed` when the generator is closed."""
    try:
        for text in texts:
            yield TextDelta(text)
    finally:
        closed.append("generator")


@pytest.mark.parametrize("token", [CancelToken(), None])
def test_closing_the_events_twice_gives_the_place_back_once_and_stops_the_step_in_flight(token):
    closed = []

    async def main():
        stream = EngineEvents(recorded(closed, "a", "b"), anyio.CapacityLimiter(1), lambda: closed.append("place"),
                              token)
        await stream.start()
        await stream.aclose()
        await stream.aclose()

    anyio.run(main)
    assert closed == ["generator", "place"]
    assert token is None or token.cancelled


def test_events_closed_from_a_cancelled_task_close_the_engines_generator_before_going_on():
    """An MCP call the client cancels closes its events in a cancelled scope: the generator (which holds the
    engine) must be closed then, not whenever it is garbage collected."""
    closed = []

    async def main():
        stream = EngineEvents(recorded(closed, "a"), anyio.CapacityLimiter(1), lambda: closed.append("place"))
        await stream.start()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await stream.aclose()
        return list(closed), stream  # the stream still referenced: nothing was closed by its collection

    assert anyio.run(main)[0] == ["generator", "place"]
