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
from ..engine.prompt import Turn

log = logging.getLogger(__name__)
CLOSE_WAIT_S = 2.0  # how long close() waits for a load in progress


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
        self._lock = threading.Lock()
        self._closing = False  # close() came first: the load closes what it builds
        self._thread = threading.Thread(target=self._run, name="engine-load", daemon=True)

    def start(self) -> BackgroundLoad:
        self._thread.start()
        return self

    def _run(self) -> None:
        t = time.perf_counter()
        try:
            engine = self._load()
            with self._lock:
                abandoned = self._closing
                self._engine = None if abandoned else engine
            if abandoned:
                engine.close()
                return
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

    def prepare(self, image: Any, resolution: int | None = None, words: str = "",
                history: tuple[Turn, ...] = (), image_with_question: bool = False) -> bool:
        return self.state == "ready" and self._engine.prepare(image, resolution, words=words, history=history,
                                                              image_with_question=image_with_question)

    @property
    def continues_answers(self) -> bool:
        """As the engine it loaded (`Request.answer_so_far`); meanwhile True: app.py loads an `Engine`, which can,
        and a request before it is ready gets `Busy` anyway."""
        return self._engine is None or bool(getattr(self._engine, "continues_answers", False))

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

    def close(self, wait: float | None = CLOSE_WAIT_S) -> None:
        """Close the engine. A load still running (a download, a conversion) is waited for `wait` seconds at most
        (Ctrl-C must not wait for a whole download): then it is abandoned - its daemon thread ends with the
        process, and an engine it still builds is closed."""
        with self._lock:
            self._closing = True
        if not self._done.wait(wait):
            log.warning("closing while the model still loads (%s): not waiting for it", self._stage or "loading")
            return
        if self._engine is not None:
            self._engine.close()
