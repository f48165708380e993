"""The real app served in this process around the bench's engine, and Debian's Chromium to drive it.

The engine runs in this process (so the Stop journey sees `engine.busy` directly); Chromium is its own
processes on the same cores, as on a laptop."""

from __future__ import annotations

import logging
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from ...engine.events import Busy, Done

log = logging.getLogger(__name__)

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--use-fake-ui-for-media-stream",
                 "--use-fake-device-for-media-stream", "--autoplay-policy=no-user-gesture-required",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run")


class BrowserUnavailable(RuntimeError):
    """Playwright or Chromium is missing; the message names the fix."""


def sync_playwright():
    """Playwright's sync API entry point, or `BrowserUnavailable` saying how to install what is missing."""
    if not CHROMIUM.exists():
        raise BrowserUnavailable(f"--browser needs Chromium at {CHROMIUM}: apt-get install chromium "
                                 "(or set CHROMIUM=/path/to/chromium)")
    try:
        from playwright.sync_api import sync_playwright as start
    except ImportError as e:
        raise BrowserUnavailable("--browser needs Playwright's Python package: pip install -r requirements-dev.txt "
                                 "(it drives Debian's Chromium; no `playwright install`)") from e
    return start


class RecordingEngine:
    """The engine as the app sees it (`ui.Backend`), noting when each request was taken up and how it ended.
    `refuse_prepare` makes `prepare` answer False, as the engine does when busy (the Stop journey)."""

    def __init__(self, engine):
        self._engine = engine
        self.requests: list[dict] = []  # {"at": wall s when the engine was asked, "busy": bool, "stats": Stats}
        self.refuse_prepare = False

    def __getattr__(self, name):
        return getattr(self._engine, name)

    @property
    def busy(self) -> bool:
        return self._engine.busy

    def prepare(self, image, resolution=None, words="", history=(), image_with_question=False) -> bool:
        return False if self.refuse_prepare else self._engine.prepare(image, resolution, words=words, history=history,
                                                                      image_with_question=image_with_question)

    def stream(self, request, wait=None, cancel=None):
        row = {"at": time.time(), "busy": False, "stats": None}
        self.requests.append(row)
        events = self._engine.stream(request, wait, cancel)
        try:
            for event in events:
                if isinstance(event, Done):
                    row["stats"] = event.stats
                yield event
        except Busy:
            row["busy"] = True
            raise
        finally:
            events.close()

    def answered_since(self, t: float) -> list[dict]:
        return [r for r in self.requests if r["at"] >= t and not r["busy"] and r["stats"] is not None]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(engine: RecordingEngine, settings, speech=None):
    """The app (`ui.create_app`, as `python app.py` builds it) on a free local port; yields its URL."""
    from ui import create_app, launch  # the bench measures the whole app (the one import of ui in fastvlm/)

    demo = create_app(engine, settings, speech)
    _, url, _ = launch(demo, "127.0.0.1", _free_port(), block=False)
    try:
        yield url
    finally:
        demo.close()


def another_chromium(browser, video: Path, audio: Path):
    """A second Chromium from `browser`'s Playwright (its fake devices are fixed at launch); close it after use."""
    args = [*CHROMIUM_ARGS, f"--use-file-for-fake-video-capture={video}", f"--use-file-for-fake-audio-capture={audio}"]
    return browser.browser_type.launch(executable_path=str(CHROMIUM), headless=True, args=args)


@contextmanager
def chromium(video: Path, audio: Path | None = None):
    """Headless Chromium with the fake webcam playing `video` and the fake microphone `audio` (looped)."""
    start = sync_playwright()
    args = [*CHROMIUM_ARGS, f"--use-file-for-fake-video-capture={video}"]
    if audio is not None:
        args.append(f"--use-file-for-fake-audio-capture={audio}")
    with start() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=args)
        try:
            yield browser
        finally:
            browser.close()
