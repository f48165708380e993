"""bench --raw's bare baseline on both vision runtimes: the same embeddings as the engine's encoder."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from fastvlm.bench.raw import RawBaseline
from fastvlm.engine import preprocess
from fastvlm.engine.engine import Engine


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
        assert emb.shape == expected.shape and seconds > 0 and np.allclose(emb, expected, atol=1e-5)
        row = raw.run(image, "What is it?", 128, n_decode=4)
        assert row["ttft_s"] > 0 and row["tokens_per_s"] > 0
    finally:
        engine.close()
