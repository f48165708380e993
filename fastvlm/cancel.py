"""Stopping a request from another thread: Stop, a closed tab, an API client that went away.

Closing a stream's generator stops decoding, but it cannot interrupt code that is running: a vision encode
or a prefill. A `CancelToken` can. The caller keeps it and calls `cancel()`; the engine checks it between
prefill chunks and decode steps, and hands an encode in flight to the vision runtime's `cancel()`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class CancelToken:
    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:
            self._set.set()
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    @property
    def cancelled(self) -> bool:
        return self._set.is_set()

    @contextmanager
    def hook(self, on_cancel: Callable[[], None]) -> Iterator[None]:
        """Call `on_cancel` if the token is cancelled while inside the block (at once if it already is)."""
        with self._lock:
            self._hooks.append(on_cancel)
            already = self._set.is_set()
        if already:
            on_cancel()
        try:
            yield
        finally:
            with self._lock:
                self._hooks.remove(on_cancel)
