"""KV snapshots on the tiny model: one that llama.cpp refuses to restore is dropped and the prompt prefilled
from the start, so the answer is a fresh engine's and later requests with that image keep working."""

from __future__ import annotations

import numpy as np

from fastvlm import GenerationOptions, Request
from fastvlm.engine.engine import Engine
from fastvlm.engine.kv import Snapshot
from tests.integration.test_lm_interrupt import fresh_answer

rng = np.random.default_rng(7)
IMAGE, OTHER = (rng.integers(0, 256, (80, 100, 3), dtype=np.uint8) for _ in range(2))
GREEDY = GenerationOptions(max_new_tokens=8, temperature=0.0)


def test_a_snapshot_that_cannot_be_restored_is_dropped_and_the_answer_is_still_right(tiny_config):
    want = fresh_answer(tiny_config, Request(IMAGE, "And its colour?", options=GREEDY))
    engine = Engine.load(tiny_config)
    try:
        engine.answer(Request(IMAGE, "What is it?", options=GREEDY))
        engine.answer(Request(OTHER, "What is it?", options=GREEDY))  # the context now holds the other image
        store = engine.lm._snapshots
        broken = {ids: Snapshot(ids, snap.data[:16]) for ids, snap in store._items.items()}
        assert broken, "the image prefills left no snapshot to break"
        store._items.update(broken)
        assert engine.answer(Request(IMAGE, "And its colour?", options=GREEDY)).text == want
        still_broken = [ids for ids, snap in broken.items() if store._items.get(ids) is snap]
        assert len(still_broken) == len(broken) - 1  # this image's is gone (replaced by a good one); the other's unused
        assert engine.answer(Request(IMAGE, "And its colour?", options=GREEDY)).text == want
    finally:
        engine.close()
