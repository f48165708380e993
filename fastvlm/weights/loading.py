"""Load an engine in the background, so a server can show its page (and a status) at once.

`BackgroundLoad` stands in for the engine: until it is ready, `describe()` says "loading",
`prepare()` declines, and `stream()` waits for the load (or raises `Busy` when told not to wait).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..engine.events import Busy, Event, ModelFileError, Request

log = logging.getLogger(__name__)


class BackgroundLoad:
    def __init__(self, load: Callable[[], Any], planned: dict):
        """`load()` builds the engine (downloading weights if it must); `planned` is what `describe()`
        reports meanwhile (resolution, threads, ...)."""
        self._load = load
        self._planned = dict(planned)
        self._engine: Any = None
        self._error: BaseException | None = None
        self._stage = ""  # what the load is doing now ("downloading …", "warming up"), for the header
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="engine-load", daemon=True)

    def start(self) -> "BackgroundLoad":
        self._thread.start()
        return self

    def _run(self) -> None:
        t = time.perf_counter()
        try:
            self._engine = self._load()
            log.info("model ready in %.1f s", time.perf_counter() - t)
        except BaseException as e:  # reported through describe() and every request
            self._error = e
            log.error("loading the model failed: %s", e)
        finally:
            self._done.set()

    def report(self, stage: str) -> None:
        """Called by `load()` as it goes; `describe()` shows the latest stage while loading."""
        self._stage = stage
        log.info("%s", stage)

    @property
    def state(self) -> str:
        if not self._done.is_set():
            return "loading"
        return "ready" if self._engine is not None else "failed"

    def ready(self, wait: float | None = None) -> Any:
        """The engine, once loaded. Raises `Busy` if it is still loading after `wait` seconds."""
        if not self._done.wait(wait):
            raise Busy("the model is still loading; try again in a moment")
        if self._engine is None:
            raise ModelFileError(f"the model could not be loaded: {self._error}")
        return self._engine

    def stream(self, request: Request, wait: float | None = None, cancel=None) -> Iterator[Event]:
        yield from self.ready(wait).stream(request, wait, cancel)

    def answer(self, request: Request, wait: float | None = None):
        return self.ready(wait).answer(request, wait)

    def prepare(self, image: Any, resolution: int | None = None) -> bool:
        return self.state == "ready" and self._engine.prepare(image, resolution)

    def describe(self) -> dict:
        if self.state == "ready":
            return {**self._engine.describe(), "state": "ready"}
        info = {**self._planned, "state": self.state, "busy": True}
        if self._stage and self.state == "loading":
            info["stage"] = self._stage
        if self._error is not None:
            info["error"] = str(self._error)
        return info

    @property
    def busy(self) -> bool:
        return self.state != "ready" or self._engine.busy

    def close(self) -> None:
        self._done.wait()
        if self._engine is not None:
            self._engine.close()
