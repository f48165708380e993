"""The weights' file lock: one process (or thread) at a time where the OS has flock, and no failure where it has
none (Windows: no `fcntl`)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from fastvlm.weights import lockfile

ROOT = Path(__file__).resolve().parents[3]


def test_a_second_holder_is_told_it_waits_and_runs_after_the_first(tmp_path):
    lock, order, told = tmp_path / "x.lock", [], threading.Event()

    def second():
        with lockfile.exclusive(lock, told.set):
            order.append("second")

    with lockfile.exclusive(lock):
        thread = threading.Thread(target=second)
        thread.start()
        assert told.wait(5)  # told at once that another holds it
        order.append("first")
    thread.join(5)
    assert order == ["first", "second"]


def test_without_flock_it_holds_nothing_and_fails_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(lockfile, "fcntl", None)
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
