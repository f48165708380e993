"""bench --raw's bare baseline: the same embeddings as the engine's encoder on both vision runtimes, and the same
greedy answer as the engine (the same work, so the ratio of their times means something)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fastvlm.bench.raw import RawBaseline
from fastvlm.engine import preprocess
from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import Request, TextDelta


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_the_raw_baseline_runs_on_each_vision_runtime(tiny_config, runtime):
    if runtime == "openvino":
        pytest.importorskip("openvino")
    engine = Engine.load(replace(tiny_config, vision_runtime=runtime, vision_precision="f32"))
    try:
        image = np.random.default_rng(2).integers(0, 256, (90, 70, 3), dtype=np.uint8)
        raw = RawBaseline(engine)  # was an AttributeError: OpenVinoVision has no `_session`
        pixels = preprocess.to_pixels(preprocess.load_image(image), 128)
        emb, seconds = raw.encode(pixels)
        expected = engine.vision.encode(pixels)
        assert emb.shape == expected.shape and 0 < seconds < 60 and np.allclose(emb, expected, atol=1e-5)
        row = raw.run(image, "What is it?", 128, n_decode=4)
        assert row["ttft_s"] > 0 and row["tokens_per_s"] > 0
    finally:
        engine.close()


def test_the_raw_baseline_computes_the_engines_greedy_answer(tiny_engine):
    image = np.random.default_rng(3).integers(0, 256, (100, 80, 3), dtype=np.uint8)
    question, n = "What is in the picture?", 12
    events = list(tiny_engine.stream(Request(image, question, options=GenerationOptions(max_new_tokens=n),
                                             resolution=128)))
    answer, done = "".join(e.text for e in events if isinstance(e, TextDelta)), events[-1]
    raw = RawBaseline(tiny_engine)
    emb, _ = raw.encode(preprocess.to_pixels(preprocess.load_image(image), 128))
    assert 0 < raw.prefill(emb, question) < 60
    tokens, seconds = raw.decode(n)
    assert len(tokens) == n and 0 < seconds < 60
    spoken = tokens[:done.stats.new_tokens]  # the engine stops at the end of the turn; the baseline does not
    assert b"".join(tiny_engine.lm.piece(t) for t in spoken).decode("utf-8", "replace") == answer
    assert len(set(tokens)) > 1  # an answer of one token repeated would prove little


def test_the_raw_rows_arithmetic(tiny_engine, monkeypatch):
    raw = RawBaseline(tiny_engine)
    monkeypatch.setattr(raw, "encode", lambda pixels: (np.zeros((4, 8), np.float32), 0.25))
    monkeypatch.setattr(raw, "prefill", lambda emb, question: 0.5)
    monkeypatch.setattr(raw, "decode", lambda n: (list(range(n)), 2.0))
    row = raw.run(np.zeros((8, 8, 3), np.uint8), "?", 128, n_decode=9)
    assert row == {"encode_s": 0.25, "prefill_s": 0.5, "ttft_s": 0.75, "tokens_per_s": 4.0}  # 8 tokens after the 1st
