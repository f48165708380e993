"""Gradio's cache stays bounded: the app's uploads are swept by age, an image still being asked about is kept.

A soak of uploads (what the Image tab, every live webcam frame and every spoken sentence become in Gradio's
cache) against the real app with a short sweep: the folder never holds more than rate x (age + sweep) files,
and empties once the uploads stop."""

from __future__ import annotations

import io
import socket
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from fastvlm import EngineConfig
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision
from ui import create_app, launch
from ui.settings import AppSettings
from ui.tab_image import keep_in_cache

SWEEP_S, AGE_S = 1, 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def cached_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


@pytest.fixture
def served(tmp_path, monkeypatch):
    cache = tmp_path / "gradio-cache"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(cache))
    engine = Engine(FakeVision(), FakeLM(), EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128))
    demo = create_app(engine, AppSettings(cache_sweep_s=SWEEP_S, cache_max_age_s=AGE_S))
    _, url, _ = launch(demo, port=free_port(), block=False)
    try:
        yield url, cache
    finally:
        demo.close()


def upload(url: str, seed: int) -> str:
    r = httpx.post(url + "gradio_api/upload", files=[("files", (f"{seed}.png", png(seed), "image/png"))], timeout=10)
    assert r.status_code == 200, r.text
    return r.json()[0]


@pytest.mark.slow
def test_uploads_are_swept_by_age_and_the_folder_stays_bounded(served):
    url, cache = served
    in_use = upload(url, seed=10**6)  # the image of a conversation that goes on
    rate, peak, t0 = 10, 0, time.monotonic()
    t_end = t0 + 3 * (AGE_S + SWEEP_S)
    seed = 0
    while time.monotonic() < t_end or seed < 60:  # a busy CPU uploads slower: count uploads, not only seconds
        upload(url, seed)
        seed += 1
        keep_in_cache(in_use)  # what each question about it does
        peak = max(peak, len(cached_files(cache)))
        time.sleep(1 / rate)
    made = seed / (time.monotonic() - t0)  # uploads per second as they really went
    assert peak <= made * (AGE_S + SWEEP_S) * 2 + 10 < seed, peak  # not one file per upload (was: seed)
    assert Path(in_use).is_file()  # asked about all along: kept
    deadline = time.monotonic() + AGE_S + 15 * SWEEP_S  # generous: a busy CPU delays the sweep
    while time.monotonic() < deadline and len(cached_files(cache)) > 1:
        keep_in_cache(in_use)
        time.sleep(0.2)
    assert [str(p) for p in cached_files(cache)] == [in_use]
