"""One process at a time: an exclusive lock on a file (POSIX `flock`). Where there is none (Windows), no lock: the
callers' work then races as it would without one, and the app still starts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None


@contextlib.contextmanager
def exclusive(lock: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file `lock` (created if missing); `waiting()` is told first when another
    process holds it."""
    if fcntl is None:
        yield
        return
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
