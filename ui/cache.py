"""Gradio's cache, kept bounded: files the app received (uploads, webcam frames, spoken sentences) are
deleted by age, every `every_s` seconds.

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
    def __init__(self, blocks, every_s: float, max_age_s: float, clock=time.time):
        self._blocks, self.every_s, self.max_age_s, self._clock = blocks, every_s, max_age_s, clock

    def sweep(self) -> int:
        """Delete the app's files older than `max_age_s` (by change time: reading an image in use refreshes it,
        see `ui.tab_image.keep_in_cache`); returns how many went."""
        keep = set()
        for component in list(self._blocks.blocks.values()):
            keep.update(getattr(component, "keep_in_cache", ()))
        removed, now = 0, self._clock()
        for files in list(self._blocks.temp_file_sets):
            for path in list(files):  # a copy: uploads keep arriving while this runs
                if path in keep:
                    continue
                try:
                    if now - os.lstat(path).st_ctime > self.max_age_s:
                        os.remove(path)
                        removed += 1
                    else:
                        continue
                except FileNotFoundError:
                    pass
                files.discard(path)
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
