"""One process at a time: an exclusive lock on a file. POSIX `flock` where there is one; on Windows a lock on the
file's first byte (`msvcrt.locking`), waited for in steps of `WINDOWS_POLL_S`. With neither, no lock: the callers'
work then races as it would without one, and the app still starts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
try:
    import msvcrt
except ImportError:  # everywhere but Windows
    msvcrt = None

WINDOWS_POLL_S = 0.2  # msvcrt's own blocking mode gives up after 10 s; a download or conversion takes longer


@contextlib.contextmanager
def exclusive(lock: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file `lock` (created if missing); `waiting()` is told first when another
    process holds it."""
    if fcntl is None and msvcrt is None:
        yield
        return
    with open(lock, "a") as f:
        if not _try_lock(f):
            if waiting is not None:
                waiting()
            _wait_for_lock(f)
        try:
            yield
        finally:
            _unlock(f)


def _try_lock(f) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    f.seek(0)  # msvcrt locks bytes from the file's position: always the first one (past the end is allowed)
    try:
        msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _wait_for_lock(f) -> None:
    if fcntl is not None:
        fcntl.flock(f, fcntl.LOCK_EX)
        return
    while not _try_lock(f):
        time.sleep(WINDOWS_POLL_S)


def _unlock(f) -> None:
    if fcntl is not None:
        fcntl.flock(f, fcntl.LOCK_UN)
    else:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
