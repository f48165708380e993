"""One answer's spoken sentences: synthesized in order by one worker thread while the answer goes on streaming,
taken one at a time by whoever plays them."""

from __future__ import annotations

import logging
import re
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures import TimeoutError as FutureTimeout

from fastvlm.speech import Speaker, Speech, SpeechUnavailable

log = logging.getLogger(__name__)


class SpeechQueue:
    """One answer's sentences, spoken in order by one worker thread while the answer goes on streaming.

    `lock` is held by whoever decides to play the next sentence, so two events never play the same queue at once."""

    def __init__(self, speaker: Speaker, on_ready: Callable[[], None] | None = None) -> None:
        """`on_ready()`: called from the speech thread each time a sentence has been synthesized."""
        self._speaker = speaker
        self.on_ready = on_ready
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="voice-tts")
        self._pending: deque[Future] = deque()
        self.lock = threading.RLock()
        self.finished = False  # no more sentences will come
        self.closed = False
        self.sentences: list[str] = []  # every sentence it was given to say, in order
        self.taken = 0  # how many of them were taken to be played (or found silent)

    def say(self, sentence: str | None) -> None:
        if not sentence or not re.search(r"\w", sentence):  # "..." alone has nothing to say
            return
        with self.lock:
            if self.closed:  # stopped: kept as unspoken, for an answer that goes on (`SpokenAnswer.going_on`)
                self.sentences.append(sentence)
            elif not self.finished:
                future = self._pool.submit(self._speaker.synthesize, sentence)
                self._pending.append(future)
                self.sentences.append(sentence)
                future.add_done_callback(self._ready)

    def _ready(self, _: Future) -> None:
        if self.on_ready is not None:  # set later than some sentences were given: they are taken by whoever
            self.on_ready()  # plays the queue next

    def finish(self) -> None:
        with self.lock:
            self.finished = True
            self._pool.shutdown(wait=False)

    @property
    def done(self) -> bool:
        return self.closed or (self.finished and not self._pending)

    def wait(self, timeout: float) -> None:
        """Until the next sentence is ready, at most `timeout` s, without holding `lock`."""
        with self.lock:
            future = self._pending[0] if self._pending else None
        if future is not None:
            futures_wait([future], timeout)

    def take(self) -> Speech | SpeechUnavailable | None:
        """The next sentence's speech (or why it has none) once ready; None while it is not (never waits)."""
        with self.lock:
            if not self._pending:
                return None
            future = self._pending[0]
        try:
            result = future.result(0)
        except FutureTimeout:
            return None
        except SpeechUnavailable as e:
            result = e
        except Exception as e:  # InputError, a cancelled sentence, or a bug in a speaker: this one stays silent
            log.warning("a sentence could not be spoken", exc_info=e)
            result = SpeechUnavailable(f"the voice failed ({type(e).__name__})")
        with self.lock:
            if self.closed or not self._pending or self._pending[0] is not future:
                _delete_result(future)
                return None
            self._pending.popleft()
            self.taken += 1
        return result

    def unspoken(self) -> list[str]:
        """The sentences it was given that were never taken to be played (it closed first)."""
        with self.lock:
            return self.sentences[self.taken:]

    def close(self) -> None:
        """Stop speaking: drop sentences not yet spoken and delete what was made but never played."""
        with self.lock:
            self.closed = True
            while self._pending:
                future = self._pending.popleft()
                if not future.cancel():
                    future.add_done_callback(_delete_result)
            self._pool.shutdown(wait=False, cancel_futures=True)


def _delete_result(future: Future) -> None:
    if future.done() and not future.cancelled() and future.exception() is None:
        future.result().delete()
