"""StopReason "cancelled": a request stopped through its CancelToken ends with one Done saying so, whether it
was stopped while waiting for its turn or while decoding, and the engine is free afterwards."""

from __future__ import annotations

import threading

import numpy as np

from fastvlm import EngineConfig, GenerationOptions, Request
from fastvlm.engine.cancel import CancelToken
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import Done, TextDelta
from tests.fakes import FakeLM, FakeVision

IMAGE = np.full((32, 32, 3), 120, np.uint8)


def make(delay: float = 0.0) -> Engine:
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    return Engine(FakeVision(), FakeLM(b"one two three four five six seven eight", delay=delay), config)


def test_cancelling_mid_answer_ends_the_stream_with_cancelled():
    engine, cancel = make(delay=0.01), CancelToken()
    events = []
    for event in engine.stream(Request(IMAGE, "q", options=GenerationOptions(max_new_tokens=64)), cancel=cancel):
        events.append(event)
        if isinstance(event, TextDelta) and len(events) > 3:
            cancel.cancel()
    done = events[-1]
    assert isinstance(done, Done) and done.stats.stop_reason == "cancelled"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert 0 < len(text) < len("one two three four five six seven eight")
    assert sum(isinstance(e, Done) for e in events) == 1 and not engine.busy


def test_cancelled_while_waiting_for_the_turn_still_ends_with_one_done():
    engine, cancel = make(delay=0.02), CancelToken()
    first = engine.stream(Request(IMAGE, "q", options=GenerationOptions(max_new_tokens=10)))
    next(first)  # holds the engine
    got = []
    waiter = threading.Thread(target=lambda: got.extend(engine.stream(Request(IMAGE, "p"), cancel=cancel)))
    waiter.start()
    cancel.cancel()
    list(first)  # the first answer ends and frees the engine; the waiter then finds itself cancelled
    waiter.join(10)
    assert [type(e) for e in got] == [Done] and got[0].stats.stop_reason == "cancelled"
    assert not engine.busy


def test_a_request_cancelled_while_waiting_leaves_the_line_while_the_first_still_runs():
    engine, cancel = make(), CancelToken()
    first = engine.stream(Request(IMAGE, "q", options=GenerationOptions(max_new_tokens=64)))
    next(first)  # holds the engine until it is closed
    got = []
    waiter = threading.Thread(target=lambda: got.extend(engine.stream(Request(IMAGE, "p"), cancel=cancel)))
    waiter.start()
    cancel.cancel()
    waiter.join(1)
    left_at_once, first_running = not waiter.is_alive(), engine.busy
    first.close()
    waiter.join(10)
    assert left_at_once and first_running  # not only once the engine was free
    assert [type(e) for e in got] == [Done] and got[0].stats.stop_reason == "cancelled"
    assert len(engine.lm.prefills) == 1  # the first's: the cancelled one did no work, nor touched the KV cache


def test_the_language_model_has_stopped_generating_when_done_comes():
    engine = make()
    for event in engine.stream(Request(IMAGE, "q", options=GenerationOptions(max_new_tokens=3))):
        if isinstance(event, Done):
            assert not engine.lm.generating.is_set()  # its generator closed: a LlamaLM's sampler is freed
