"""The cache sweeper deletes the app's old files, keeps fresh and pinned ones, and survives uploads that land
while it sweeps (Gradio's own task dies of "Set changed size during iteration" there)."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import pytest

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


def test_past_max_bytes_the_oldest_files_go_first_and_pinned_ones_stay(tmp_path, monkeypatch):
    """Uploads sent faster than they age out (30 min) filled the disk: the total is brought back under max_bytes."""
    paths = [tmp_path / f"{i}.png" for i in range(5)]
    for p in paths:
        p.write_bytes(b"x" * 100)
    files = {str(p) for p in paths}
    ctimes = {str(p): 1000 + i for i, p in enumerate(paths)}  # 0 oldest ... 4 newest (a change time cannot be
    real_lstat = os.lstat  # set, so the sweeper is shown these)
    monkeypatch.setattr(os, "lstat", lambda path: SimpleNamespace(st_ctime=ctimes[path],
                                                                  st_size=real_lstat(path).st_size))
    sweeper = CacheSweeper(_blocks(files, [str(paths[0])]), 1, 60, max_bytes=250, clock=lambda: 1010)
    assert sweeper.sweep() == 2  # 400 bytes not pinned: the two oldest of them go (was: none, all under 60 s old)
    assert [p.exists() for p in paths] == [True, False, False, True, True], "pinned, 2 oldest gone, newest kept"
    assert files == {str(paths[0]), str(paths[3]), str(paths[4])}
    assert CacheSweeper(_blocks(files), 1, 60, clock=lambda: 1010).sweep() == 0  # no max_bytes: by age only


def test_a_file_exactly_max_age_old_and_a_total_exactly_max_bytes_stay(tmp_path):
    paths = [tmp_path / f"{i}.png" for i in range(2)]
    for p in paths:
        p.write_bytes(b"x" * 100)
    files = {str(p) for p in paths}
    now = min(os.lstat(p).st_ctime for p in paths)  # the older exactly 60 s old at the clock below
    at_limit = CacheSweeper(_blocks(files), 1, 60, max_bytes=200, clock=lambda: now + 60)
    assert at_limit.sweep() == 0 and all(p.exists() for p in paths)
    at_limit.max_bytes = 199
    assert at_limit.sweep() == 1


class Server(SimpleNamespace):
    """Blocks whose `is_running` follows a script, one value per tick (then False: closed)."""

    def __init__(self, states):
        super().__init__(blocks={}, temp_file_sets=[])
        self._states, self.ticks = list(states), 0

    @property
    def is_running(self):
        self.ticks += 1
        return self._states.pop(0) if self._states else False


def test_the_sweeper_runs_before_the_server_starts_and_ends_with_it(monkeypatch):
    server = Server([False, False, True, True, False])  # launching, up, then closed
    swept = []
    sweeper = CacheSweeper(server, 0.001, 60)

    def sweep():
        swept.append(server.ticks)
        if len(swept) == 1:
            raise OSError("a bad sweep")  # logged; the next tick sweeps again
        return 0

    monkeypatch.setattr(sweeper, "sweep", sweep)
    thread = threading.Thread(target=sweeper._run, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()  # ended when the server closed
    assert swept == [1, 2, 3, 4]  # not before it started only, and not after it closed


@pytest.mark.parametrize("max_bytes, cap", [(5_000_000, 5_000_000), (0, None)])  # 0: by age only
def test_the_apps_sweeper_keeps_the_settings_limits(max_bytes, cap):
    from tests.unit.ui.test_ui_image import make_engine
    from ui import create_app
    from ui.settings import AppSettings

    settings = AppSettings(cache_sweep_s=7, cache_max_age_s=90, cache_max_bytes=max_bytes)
    sweeper = create_app(make_engine(), settings).cache_sweeper
    assert (sweeper.every_s, sweeper.max_age_s, sweeper.max_bytes) == (7, 90, cap)
