"""The weights' file lock: one process (or thread) at a time with flock, and with Windows' `msvcrt.locking` (its
documented behaviour played by a fake here: these tests run on Linux); no failure where there is neither."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fastvlm.weights import lockfile

ROOT = Path(__file__).resolve().parents[3]


class FakeMsvcrt:
    """`msvcrt.locking` as documented: locks `nbytes` from the file's position, per open file (handle); LK_NBLCK
    raises OSError at once when another handle holds them; unlocking bytes not locked raises too."""

    LK_NBLCK, LK_UNLCK = 2, 0

    def __init__(self):
        self.held: dict[tuple[int, int], int] = {}  # (inode, offset) -> the fd holding it
        self.calls: list[tuple[int, int]] = []
        self.guard = threading.Lock()

    def locking(self, fd: int, mode: int, nbytes: int) -> None:
        key = (os.fstat(fd).st_ino, os.lseek(fd, 0, os.SEEK_CUR))
        assert nbytes == 1
        with self.guard:
            self.calls.append((mode, key[1]))
            holder = self.held.get(key)
            if mode == self.LK_NBLCK:
                if holder is not None:
                    raise OSError(errno.EACCES, "Permission denied")
                self.held[key] = fd
            elif mode == self.LK_UNLCK:
                if holder != fd:
                    raise OSError(errno.EACCES, "Permission denied")
                del self.held[key]


@pytest.fixture(params=["flock", "msvcrt"])
def os_lock(request, monkeypatch):
    """The lock as on Linux/macOS (flock) and as on Windows (no fcntl; msvcrt, faked)."""
    if request.param == "msvcrt":
        fake = FakeMsvcrt()
        monkeypatch.setattr(lockfile, "fcntl", None)
        monkeypatch.setattr(lockfile, "msvcrt", fake)
        monkeypatch.setattr(lockfile, "WINDOWS_POLL_S", 0.01)
        return fake
    assert lockfile.fcntl is not None
    return None


def test_a_second_holder_is_told_it_waits_and_runs_after_the_first(tmp_path, os_lock):
    lock, order, told = tmp_path / "x.lock", [], threading.Event()
    lock.write_text("left by an earlier tool\n")  # opened to append: the position starts past this

    def second():
        with lockfile.exclusive(lock, told.set):
            order.append("second")

    with lockfile.exclusive(lock):
        thread = threading.Thread(target=second, daemon=True)  # a lock never undone must not hang the run
        thread.start()
        assert told.wait(5)  # told at once that another holds it
        order.append("first")
    thread.join(5)
    assert not thread.is_alive() and order == ["first", "second"]
    if os_lock is not None:  # the first byte every time, each lock undone, nothing left held
        assert {offset for _, offset in os_lock.calls} == {0} and os_lock.held == {}


def test_the_lock_is_undone_when_the_work_fails(tmp_path, os_lock):
    lock, told, done = tmp_path / "x.lock", [], threading.Event()
    with pytest.raises(RuntimeError), lockfile.exclusive(lock):
        raise RuntimeError("the download failed")

    def again():
        with lockfile.exclusive(lock, lambda: told.append(1)):
            done.set()

    thread = threading.Thread(target=again, daemon=True)
    thread.start()
    assert done.wait(5) and told == []  # free at once
    thread.join(5)  # its lock undone before the test's stand-in for the OS's lock is taken away
    assert not thread.is_alive()


def test_without_flock_or_msvcrt_it_holds_nothing_and_fails_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(lockfile, "fcntl", None)
    monkeypatch.setattr(lockfile, "msvcrt", None)
    told = []
    lock = tmp_path / "x.lock"
    with lockfile.exclusive(lock, lambda: told.append(1)), lockfile.exclusive(lock, lambda: told.append(2)):
        pass  # the same lock twice at once: with flock the second would wait for ever
    assert told == [] and not lock.exists()


def test_the_app_and_the_weights_import_where_there_is_no_fcntl():
    code = ("import sys; sys.modules['fcntl'] = None\n"  # what `import fcntl` meets on Windows: ImportError
            "import app, fastvlm.cli.main, fastvlm.weights.pins, fastvlm.weights.official, fastvlm.weights.resolve\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr

