"""A question's words while it is still spoken, so that the engine prefills them before it ends.

Once the question's camera frame is prepared (`TurnTaker.want_words(start_s)`), Whisper transcribes the speech
so far every `words_ahead_s` of it, one transcription at a time (in a thread: the taker's), never beside that of
a pause; each transcript, all but its last word (the audio may end inside it), comes out of `TurnTaker.feed()`
as `HeardSoFar` (as do all the words of a pause the judge calls unfinished: they end on a whole word), and the
caller has the engine prefill those words after the image (`Engine.prepare(frame, words=...)`). The answer then
prefills only the rest of the question: on a CPU without AVX-512 the question's ~15 positions after a prepared
image were most of its TTFT. Off by default (`words_ahead_s` 0): on 2 cores shared with the browser the extra
Whisper runs made the first sound later (docs/speech.md).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from .vad import TurnDetector

_TRAILING = ".,;:!?…-"  # how Whisper ends words that trail off ("What color is the...")


@dataclass(frozen=True)
class HeardSoFar:
    """The first words of the question that began at `start_s`, heard while it goes on."""

    start_s: float
    words: str


def words_before_last(text: str) -> str:
    """All but the last word of a transcript of speech that goes on (its last word may be cut off)."""
    return " ".join(text.split()[:-1])


class WordsAhead:
    """One person's transcriptions of the question going on (`TurnTaker` holds one; fed from its thread)."""

    def __init__(self, transcribe: Callable[[np.ndarray], Future], every_s: float) -> None:
        """`transcribe(audio)`: a Future of its `Transcript`, made in a thread; `every_s`: seconds of speech
        between transcriptions (0: never)."""
        self.transcribe, self.every_s = transcribe, every_s
        self.wanted: float | None = None  # the first sound of the question whose frame is prepared (`want`)
        self._after = float("-inf")  # where the last question ended: a frame prepared before that is not this one's
        self._start_s: float | None = None  # the question transcribed ahead
        self._heard_s = 0.0  # how much of it had been spoken at the last transcription
        self._future: Future | None = None  # -> Transcript

    @property
    def pending(self) -> Future | None:
        """The transcription under way (or finished and not yet told), if any."""
        return self._future

    def want(self, onset_s: float) -> None:
        """The frame of the speech first heard at `onset_s` is prepared: the question that began there (or
        after it: a first sound too short to be speech, then the question) is worth transcribing ahead (when on)."""
        if self.every_s > 0 and onset_s >= self._after:
            self.wanted = onset_s

    def reset(self, ended_s: float | None = None) -> None:
        """The question that ended at `ended_s` is over (None: all is forgotten): nothing more for it; a
        transcription under way is dropped."""
        self.wanted, self._start_s, self._heard_s, self._future = None, None, 0.0, None
        self._after = float("-inf") if ended_s is None else ended_s

    def at_pause(self, start_s: float, transcript: Future) -> list[HeardSoFar]:
        """A pause in a question the judge calls unfinished ("What color is the…"): its transcript, made anyway,
        ends on a whole word, so all its words are the question's so far (if they are wanted)."""
        if self.wanted is None or start_s < self.wanted or not transcript.done() or transcript.exception():
            return []
        heard = transcript.result()
        words = "" if heard.asks_nothing else heard.text.strip().rstrip(_TRAILING).strip()
        return [HeardSoFar(start_s, words)] if words else []

    def step(self, detector: TurnDetector, busy: bool) -> list[HeardSoFar]:
        """After each chunk: the words of a finished transcription, and the next one begun when it is due.
        `busy`: a pause is being transcribed (its transcript is the newer one; nothing begins beside it)."""
        out = self._finished(busy)
        now = detector.speaking()
        wanted = self.wanted is not None and now is not None and now[0] >= self.wanted
        if busy or not wanted or self._future is not None:  # wanted only when on (`want`)
            return out
        start_s, spoken_s = now
        if start_s != self._start_s:
            self._start_s, self._heard_s = start_s, 0.0
        if spoken_s - self._heard_s >= self.every_s:  # speaking: there is speech so far
            self._heard_s, self._future = spoken_s, self.transcribe(detector.speech_so_far())
        return out

    def _finished(self, busy: bool) -> list[HeardSoFar]:
        f = self._future
        if f is None or not f.done():
            return []
        self._future = None
        if busy or f.exception() is not None:  # failed: only a head start is lost; the question's transcript decides
            return []
        words = words_before_last(f.result().text)
        return [HeardSoFar(self._start_s, words)] if words else []

