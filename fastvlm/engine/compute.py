"""One thread for every llama.cpp computation, whichever thread asks for it.

llama.cpp's CPU backend, as llama-cpp-python builds it, runs each graph on an OpenMP team that belongs to the
calling thread, and libgomp keeps that team for as long as the thread lives. The app asks from many threads
(Gradio's workers, the answer's read-ahead thread, the voice line's prepare thread, the engine's own prepare
thread), so their teams soon outnumber the cores. libgomp then stops spinning at its barriers (100 spins
instead of 300 000) and sleeps and wakes its threads at every barrier of the graph instead. Measured on
2 cores (docs/performance.md): ~110 000 context switches against ~700 for the same 256 tokens, and the app's
answers decoded 15-20 tok/s against 24-25 from one thread. `ComputeThread` hands each such call to one thread
of its own, so only one team ever exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class ComputeThread:
    """Runs `fn(*args)` on one long-lived thread and returns its result (or raises its exception) to the caller.
    The thread starts on the first call; calls from several threads run one after another."""

    def __init__(self, name: str = "llama-compute") -> None:
        self._ident: int | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=self._started)

    def run(self, fn: Callable[..., T], *args) -> T:
        if threading.get_ident() == self._ident:  # already on it: a queued call would wait for itself
            return fn(*args)
        return self._pool.submit(fn, *args).result()

    def _started(self) -> None:
        self._ident = threading.get_ident()

    def close(self) -> None:
        """Wait for the call in flight, then end the thread."""
        self._pool.shutdown(wait=True)
