"""Gradio's cache, kept bounded: files the app received (uploads, webcam frames, spoken sentences) are
deleted by age, and the oldest first past a total size, every `every_s` seconds.

Gradio's own `delete_cache` task iterates its live file sets from a worker thread: an upload that lands
during a sweep raises "Set changed size during iteration" and ends that task for good (seen with Gradio
6.31 under load), after which nothing is deleted again. This sweeper iterates copies and survives errors.
"""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger(__name__)


class CacheSweeper:
    """`max_bytes`: past this total the oldest files go too (None: by age only), so uploads sent faster than they
    age out (50 MB each, as fast as the network allows) cannot fill the disk; each sweep brings the total back."""

    def __init__(self, blocks, every_s: float, max_age_s: float, max_bytes: int | None = None, clock=time.time):
        self._blocks, self.every_s, self.max_age_s, self.max_bytes = blocks, every_s, max_age_s, max_bytes
        self._clock = clock

    def sweep(self) -> int:
        """Delete the app's files older than `max_age_s` (by change time: reading an image in use refreshes it,
        see `ui.tab_image.keep_in_cache`), then, oldest first, those past `max_bytes`; returns how many went."""
        keep = set()
        for component in list(self._blocks.blocks.values()):
            keep.update(getattr(component, "keep_in_cache", ()))
        now, young, removed = self._clock(), [], 0  # young: (change time, size, path, its set) of those kept by age
        for files in list(self._blocks.temp_file_sets):
            for path in list(files):  # a copy: uploads keep arriving while this runs
                if path in keep:
                    continue
                try:
                    st = os.lstat(path)
                except FileNotFoundError:
                    files.discard(path)
                    continue
                if now - st.st_ctime <= self.max_age_s:
                    young.append((st.st_ctime, st.st_size, path, files))
                elif _remove(path, files):
                    removed += 1
        total = sum(size for _, size, _, _ in young)
        for _, size, path, files in sorted(young, key=lambda f: f[0]):
            if self.max_bytes is None or total <= self.max_bytes:
                break
            total -= size
            removed += _remove(path, files)
        return removed

    def start(self) -> CacheSweeper:
        threading.Thread(target=self._run, name="gradio-cache-sweeper", daemon=True).start()
        return self

    def _run(self) -> None:
        seen_running = False
        while True:  # ends with the server (below)
            time.sleep(self.every_s)
            running = bool(getattr(self._blocks, "is_running", False))
            if seen_running and not running:  # the server was closed
                return
            seen_running = seen_running or running
            try:
                if n := self.sweep():
                    log.debug("deleted %d old files from Gradio's cache", n)
            except Exception:  # never let one bad sweep end the sweeping
                log.exception("sweeping Gradio's cache failed; trying again in %.0f s", self.every_s)


def _remove(path: str, files: set) -> bool:
    """Delete `path` and forget it from `files`; False if it was already gone."""
    files.discard(path)
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False
