"""Browser tests: the app on the tiny synthetic models, launched once in this process, driven by Debian's
Chromium through Playwright's Python API (no `playwright install`). The fake camera plays a Y4M clip the
session writes with numpy. Skipped cleanly when /usr/bin/chromium or playwright is missing."""

from __future__ import annotations

import socket
import threading
import time
import warnings
from dataclasses import dataclass

import pytest

from fastvlm.bench.browser.media import write_y4m  # the fake camera (test_voice_tab imports it from here)
from fastvlm.bench.browser.serve import CHROMIUM, CHROMIUM_ARGS
from tests.installed import skip_missing_ci


# -- a slowed engine -----------------------------------------------------------------------------------------
class SlowLM:
    """Wraps the tiny language model: each token sleeps `delay`, each prefill `prefill_delay`; `endless` ignores
    end tokens, so every answer runs to max_new_tokens. Records when generations run, to prove that none ever
    overlap."""

    def __init__(self, lm):
        self._lm = lm
        self.delay, self.endless, self.prefill_delay = 0.0, False, 0.0
        self.spans: list[tuple[float, float, int]] = []  # (start, end, tokens) of each generation
        self.active = self.max_active = 0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._lm, name)

    def generate(self, options, seed=0):
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        start, tokens, n = time.monotonic(), self._lm.generate(options, seed), 0
        try:
            for token in tokens:
                if self.delay:
                    time.sleep(self.delay)
                n += 1
                yield token
        finally:
            tokens.close()
            with self._lock:
                self.active -= 1
                self.spans.append((start, time.monotonic(), n))

    def prefill(self, parts, should_stop=None, logits=True):
        time.sleep(self.prefill_delay)  # a slow image: its prepare holds the engine this long
        return self._lm.prefill(parts, should_stop, logits)

    def stop_reason(self, token):
        return None if self.endless else self._lm.stop_reason(token)

    def reset_knobs(self) -> None:
        self.delay, self.endless, self.prefill_delay = 0.0, False, 0.0


@dataclass
class Server:
    url: str
    engine: object
    lm: SlowLM


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- fixtures ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def sync_api():
    if not CHROMIUM.exists():
        skip_missing_ci("chromium", f"{CHROMIUM} is missing: apt-get install chromium chromium-driver")
    return pytest.importorskip("playwright.sync_api")  # requirements-dev.txt: a skip fails under CI


@pytest.fixture(scope="session")
def browser(sync_api, tmp_path_factory):
    clip = write_y4m(tmp_path_factory.mktemp("camera") / "camera.y4m")
    args = [*CHROMIUM_ARGS, f"--use-file-for-fake-video-capture={clip}"]
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def server(browser, tiny_config):
    from fastvlm.engine.engine import Engine
    from ui import AppSettings, create_app, launch

    engine = Engine.load(tiny_config)  # its own engine: its language model gets slowed
    lm = engine.lm = SlowLM(engine.lm)
    settings = AppSettings(max_new_tokens=32, snapshot_max_new_tokens=24, live_max_new_tokens=12,
                           live_interval_s=1, frame_every_s=0.5)
    demo = create_app(engine, settings)
    _, url, _ = launch(demo, "127.0.0.1", _free_port(), block=False)
    yield Server(url, engine, lm)
    demo.close()
    end = time.monotonic() + 30  # an answer a failed test left running (its Stop never clicked) ends by then
    while engine.busy and time.monotonic() < end:
        time.sleep(0.1)
    if engine.busy:  # closing would wait on it for ever and hang the whole run
        warnings.warn("the browser tests' engine was still answering 30 s after the server closed; not closed",
                      stacklevel=1)
        return
    engine.close()


@pytest.fixture
def app_server(server):
    server.lm.reset_knobs()
    yield server
    server.lm.reset_knobs()


@pytest.fixture
def new_page(browser, app_server):
    """Opens the app in a fresh browser context (a separate person); all are closed after the test."""
    contexts = []

    def open_page():
        context = browser.new_context(viewport={"width": 1280, "height": 900}, permissions=["camera"])
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(app_server.url)
        page.locator("#image-input").wait_for()
        return page

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def sample_images(tmp_path_factory):
    from PIL import Image, ImageDraw

    folder = tmp_path_factory.mktemp("images")
    paths = []
    for i, (bg, fg) in enumerate([((40, 120, 200), (250, 200, 40)), ((30, 140, 60), (240, 240, 240))]):
        image = Image.new("RGB", (480, 360), bg)
        draw = ImageDraw.Draw(image)
        draw.ellipse((140, 80, 340, 280), fill=fg)
        draw.rectangle((16, 16, 200, 60), fill=(255, 255, 255))
        draw.text((26, 30), f"SAMPLE {i}", fill=(0, 0, 0))
        paths.append(folder / f"sample{i}.png")
        image.save(paths[-1])
    return paths
