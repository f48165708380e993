"""Stopping llama.cpp inside a call (its abort callback through `NativeFlag`), on the tiny model: the call
ends with `Cancelled`, the KV cache keeps exactly the positions before it, and the next answer is the one a
fresh engine gives."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm import GenerationOptions, Request
from fastvlm.engine.engine import Engine
from fastvlm.engine.kv import Tokens
from fastvlm.engine.lm import Cancelled, LlamaLM

IMAGE = np.random.default_rng(5).integers(0, 256, (80, 100, 3), dtype=np.uint8)
GREEDY = GenerationOptions(max_new_tokens=12, temperature=0.0)


def _kv_positions(lm: LlamaLM) -> int:
    return lm._ll.llama_memory_seq_pos_max(lm._mem, 0) + 1


def test_an_interrupted_call_leaves_the_positions_before_it(tiny_config):
    lm = LlamaLM.load(tiny_config)
    try:
        first = Tokens(tuple(lm.tokenize("a photo of a red disc", special=False)))
        lm.prefill([first], logits=False)
        held = _kv_positions(lm)
        assert held == len(first.ids)
        second = Tokens(tuple(lm.tokenize(" on a white table", special=False)))
        calls = []

        def interrupt_during_the_call():  # asked before each call: sets the flag the call then reads
            calls.append(1)
            lm.interrupt()
            return False

        with pytest.raises(Cancelled):
            lm.prefill([first, second], should_stop=interrupt_during_the_call)
        assert calls == [1] and _kv_positions(lm) == held == len(lm._held)
        lm.prefill([first, second])  # the flag is down again: new work runs
        assert _kv_positions(lm) == len(first.ids) + len(second.ids)
    finally:
        lm.close()


def fresh_answer(config, request: Request) -> str:
    """What an engine that has answered nothing before says to `request`."""
    fresh = Engine.load(config)
    try:
        return fresh.answer(request).text
    finally:
        fresh.close()


def test_after_an_interrupt_the_engine_answers_as_a_fresh_one(tiny_config):
    want = fresh_answer(tiny_config, Request(IMAGE, "What is it?", options=GREEDY))
    engine = Engine.load(tiny_config)
    try:
        engine.lm.interrupt()  # a late interrupt of an earlier request must not stop the next one
        assert engine.answer(Request(IMAGE, "What is it?", options=GREEDY)).text == want
        original = engine.lm._decode

        def interrupted_decode(chunk, logits):
            engine.lm.interrupt()
            return original(chunk, logits)

        engine.lm._decode = interrupted_decode
        with pytest.raises(Cancelled):
            engine.lm.prefill([Tokens(tuple(engine.lm.tokenize("another question", special=False)))])
        engine.lm._decode = original
        assert engine.answer(Request(IMAGE, "What is it?", options=GREEDY)).text == want
        assert not engine.busy
    finally:
        engine.close()
