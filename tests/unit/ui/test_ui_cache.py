"""The cache sweeper deletes the app's old files, keeps fresh and pinned ones, and survives uploads that land
while it sweeps (Gradio's own task dies of "Set changed size during iteration" there)."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

from ui.cache import CacheSweeper


def _blocks(files: set, pinned=()):
    return SimpleNamespace(blocks={1: SimpleNamespace(keep_in_cache=set(pinned))}, temp_file_sets=[files],
                           is_running=True)


def test_old_files_go_fresh_and_pinned_ones_stay(tmp_path):
    old, fresh, pinned = (tmp_path / n for n in ("old.png", "fresh.png", "pinned.png"))
    for p in (old, fresh, pinned):
        p.write_bytes(b"x")
    files = {str(old), str(fresh), str(pinned), str(tmp_path / "gone.png")}
    now = os.lstat(fresh).st_ctime
    sweeper = CacheSweeper(_blocks(files, [str(pinned)]), 1, 60, clock=lambda: now + 30)
    assert sweeper.sweep() == 0  # nothing is 60 s old yet; the vanished file leaves the set
    assert files == {str(old), str(fresh), str(pinned)}
    sweeper._clock = lambda: now + 120
    assert sweeper.sweep() == 2 and not old.exists() and not fresh.exists() and pinned.exists()
    assert files == {str(pinned)}


def test_uploads_arriving_during_sweeps_never_break_it(tmp_path):
    files: set = set()
    sweeper = CacheSweeper(_blocks(files), 1, 0, clock=lambda: time.time() + 10)
    stop = threading.Event()

    def upload():
        i = 0
        while not stop.is_set():
            p = tmp_path / f"{i}.png"
            p.write_bytes(b"x")
            files.add(str(p))
            i += 1

    t = threading.Thread(target=upload)
    t.start()
    try:
        removed, end = 0, time.monotonic() + 0.5
        while time.monotonic() < end:
            removed += sweeper.sweep()
    finally:
        stop.set()
        t.join()
    assert removed > 0
    sweeper.sweep()
    assert not list(tmp_path.iterdir()) and not files
