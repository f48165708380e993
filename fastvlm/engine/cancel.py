"""Stopping a request from another thread: Stop, a closed tab, an API client that went away.

Closing a stream's generator stops decoding, but it cannot interrupt code that is running: a vision encode
or a prefill. A `CancelToken` can. The caller keeps it and calls `cancel()`; the engine checks it between
prefill calls and decode steps, and hands an encode in flight to the vision runtime's `cancel()` and a
llama.cpp call in flight to the language model's `interrupt()` (a `NativeFlag`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext


class CancelToken:
    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        with self._lock:  # hooks run under the lock: once a `hook()` block has exited, its hook never runs
            self._set.set()
            for hook in self._hooks:
                hook()  # a model's own stop: sets a flag, never blocks

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


def on_cancel(cancel: CancelToken | None, action: Callable[[], None] | None) -> AbstractContextManager:
    """Run `action` (a model's own stop) if `cancel` fires inside the block; nothing to hook: no-op."""
    return cancel.hook(action) if cancel is not None and action is not None else nullcontext()


class NativeFlag:
    """A stop flag that C code reads without calling into Python: llama.cpp's abort callback.

    llama.cpp's CPU backend calls `abort_callback(data)` after every node of the graph it computes (~26 000
    times per answer). A Python callback there takes the GIL each time: next to one busy Python thread it
    made decode 5x slower (measured, docs/performance.md). So the callback is libc's own `strlen`, and `data`
    a two-byte string: empty reads as 0 (go on), one byte as 1 (abort). `strlen` returns its count in the
    register a C `bool` is returned in, on every C calling convention the app runs on.
    """

    def __init__(self, callback_type) -> None:
        self._bytes = ctypes.create_string_buffer(2)
        self.callback = ctypes.cast(_strlen(), callback_type)  # a C function pointer: no Python on the call
        self.data = ctypes.cast(self._bytes, ctypes.c_void_p)

    @classmethod
    def available(cls) -> bool:
        return _strlen() is not None

    def set(self) -> None:
        self._bytes[0] = b"\x01"

    def clear(self) -> None:
        self._bytes[0] = b"\x00"

    @property
    def is_set(self) -> bool:
        return self._bytes[0] != b"\x00"


@functools.cache
def _strlen():
    """libc's `strlen`, or None where no C library can be found by name."""
    name = ctypes.util.find_library("c") or ("msvcrt" if sys.platform == "win32" else None)
    try:
        return ctypes.CDLL(name).strlen if name else None
    except (OSError, AttributeError):
        return None
