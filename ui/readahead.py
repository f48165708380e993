"""Read an engine stream ahead of the page: decoding never waits for a page update to be sent.

Gradio pulls a handler's generator one item at a time, and between two pulls it turns the last update into a
page message; pulled straight through, the engine's own generator stood still meanwhile (through the page at
512 on 2 cores, the voice tab's first sound went from 1.51 to 1.37 s without that, docs/voice.md). `ReadAhead` runs
the stream in a thread of its own and hands its events over in order; closing it stops the stream (at its next
event, or at once through the request's `CancelToken`) and returns when the engine is free.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

from fastvlm.engine.cancel import CancelToken

log = logging.getLogger(__name__)
T = TypeVar("T")
_END = object()


class _Failed:
    def __init__(self, error: Exception) -> None:
        self.error = error


class ReadAhead(Generic[T]):
    """An iterator over `events`, which a thread of its own reads as fast as they come."""

    def __init__(self, events: Iterator[T], cancel: CancelToken | None = None, join_s: float = 30.0) -> None:
        """`cancel`: the token `events` was made with, cancelled when this closes before the end;
        `join_s`: the longest `close()` waits for the stream to stop."""
        self._events, self._cancel, self._join_s = events, cancel, join_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._pump, name="read-ahead", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            for event in self._events:
                self._queue.put(event)
                if self._stop.is_set():
                    break
        except Exception as e:  # noqa: BLE001 - raised again in the reader's thread
            self._queue.put(_Failed(e))
        finally:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()  # stops the engine's generator here, in the thread that runs it
            self._queue.put(_END)

    def __iter__(self) -> ReadAhead[T]:
        return self

    def __next__(self) -> T:
        if self._ended:
            raise StopIteration
        item = self._queue.get()
        if item is _END or isinstance(item, _Failed):
            self._ended = True
            self._thread.join(self._join_s)
            if isinstance(item, _Failed):
                raise item.error
            raise StopIteration
        return item

    @property
    def waiting(self) -> bool:
        """More events have already arrived."""
        return not self._queue.empty()

    def close(self) -> None:
        """Stop reading: the stream stops and the engine is free when this returns (within `join_s`)."""
        if self._ended:
            return
        self._ended = True
        self._stop.set()
        if self._cancel is not None:
            self._cancel.cancel()
        self._thread.join(self._join_s)
        if self._thread.is_alive():
            log.warning("an answer's stream did not stop within %.0f s of being closed", self._join_s)
