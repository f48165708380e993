"""Single flight: one inference at a time across all threads, and prepares that run only while the engine is idle.

A request waits for its turn (or gives up after its wait) and cancels out of the line; while one waits, a running
prepare gives way within one prefill chunk, unless the request is for the very image (and size) being prepared:
then it lets that prefill finish, which it would only redo. A prepare asked for later takes over from the one
running. `Flight` holds only this bookkeeping; what a turn or a prepare does is the engine's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from . import preprocess
from .cancel import CancelToken
from .events import Busy

QUEUE_POLL_S = 0.05  # a request waiting for its turn looks at its cancel token this often
PREPARE_WAIT_S = 10.0  # the longest a newer prepare waits for the one it replaces to give way


@dataclass(frozen=True)
class Claim:
    """What a prepare is for: the image (any source `preprocess` reads) at a size, the first words of its question
    it prefills, and the conversation before that question, `(turns, image_with_question)`."""

    image: object = None
    size: int = 0
    words: str = ""
    history: tuple = ()

    def same_prompt_start(self, other: Claim) -> bool:
        """The same image at the same size after the same conversation (the words may differ)."""
        return (preprocess.same_source(self.image, other.image) and self.size == other.size
                and self.history == other.history)


NOTHING = Claim()  # no prepare is running


class Flight:
    """The engine's lock, the requests in line for it, and the prepare holding it (if any)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._guard = threading.Lock()
        self._let_go = threading.Condition(self._guard)  # a prepare let go of the lock
        self._waiting = 0  # real requests waiting for the lock; a running prepare yields to them
        self._queued = 0  # all requests waiting for the lock, those that let a prepare finish too: none starts then
        self._preparing = NOTHING  # held while a prepare holds the lock, under `_guard`
        self._prepares = 0  # prepares asked for so far: only the newest may run

    @property
    def busy(self) -> bool:
        return self.lock.locked()

    @contextmanager
    def turn(self, wait: float | None, cancel: CancelToken, image=None, size: int = 0) -> Iterator[None]:
        """Hold the engine; `Busy` after `wait` s. A request cancelled while in line gets in without the engine (it
        only ends, costing no encode and no prefill). A request for the very image (and size) being prepared lets
        that prefill finish (it would only redo it: a camera frame prepared while the question is spoken)."""
        with self._guard:
            preempts = image is None or not (preprocess.same_source(image, self._preparing.image)
                                             and size == self._preparing.size)
            self._waiting += preempts
            self._queued += 1
        try:
            got = self._acquire(wait, cancel)
        finally:
            with self._guard:
                self._waiting -= preempts
                self._queued -= 1
        if not got and not cancel.cancelled:
            raise Busy("the engine is answering another request; try again in a moment")
        try:
            yield
        finally:
            if got:
                self.lock.release()

    def _acquire(self, wait: float | None, cancel: CancelToken) -> bool:
        """The lock within `wait` seconds (None: however long), looking at `cancel` every QUEUE_POLL_S."""
        deadline, left = (None, None) if wait is None else (time.monotonic() + max(wait, 0), max(wait, 0))
        while not self.lock.acquire(timeout=QUEUE_POLL_S if left is None else min(QUEUE_POLL_S, left)):
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            if cancel.cancelled or left == 0:
                return False
        return True

    def preempted(self) -> bool:
        """A request waits that a running prepare must give way to."""
        return self._waiting > 0

    @contextmanager
    def preparing(self, claim: Claim) -> Iterator[Callable[[], bool] | None]:
        """Hold the engine for a prepare of `claim`, yielding `stale` (true once a request waits or a newer prepare
        was asked for: the prepare should stop), or None when it is not to run: a request waits, the same prepare
        is under way (with the same words, or asking none), one with words for another image runs (someone else's
        question comes first), an answer holds the engine, or a newer prepare was asked for meanwhile."""
        mine = self._ask(claim)
        if mine is None or not self._acquire_for_prepare(mine, claim):
            yield None
            return
        try:
            yield lambda: self.preempted() or self._prepares != mine
        finally:
            with self._let_go:
                self._preparing = NOTHING
                self.lock.release()
                self._let_go.notify_all()

    def _ask(self, claim: Claim) -> int | None:
        """This prepare's number, or None when it is not to run (see `preparing`)."""
        with self._guard:
            if self._queued:
                return None
            same = claim.same_prompt_start(self._preparing)
            if same and claim.words in ("", self._preparing.words):
                return None  # already under way
            if claim.words and self._preparing is not NOTHING and not same:
                return None  # another image is being prepared (someone else's question): it comes first
            self._prepares += 1
            return self._prepares

    def _acquire_for_prepare(self, mine: int, claim: Claim) -> bool:
        """The lock for prepare number `mine`, claimed for `claim` in the same step, once the prepare running (if
        any) gave way, within PREPARE_WAIT_S; never while an answer holds it or waits, nor once a newer prepare was
        asked for. Under `_guard` a prepare holds the lock exactly while `_preparing` is set, so a lock held with
        nothing being prepared is an answer's."""
        deadline = time.monotonic() + PREPARE_WAIT_S
        with self._let_go:
            while not self._queued and self._prepares == mine:
                if self.lock.acquire(blocking=False):
                    self._preparing = claim
                    return True
                if self._preparing is NOTHING or time.monotonic() > deadline:
                    return False
                self._let_go.wait(QUEUE_POLL_S)
        return False
