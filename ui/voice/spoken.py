"""One answer as far as it was decoded and spoken.

Speech over an answer (playing, or still being made) stops its decode at once (the cores go to hearing the
speech). When that speech turns out to be no question (a cough, an echo, "uh"), the page plays on what it holds
of the answer, and `SpokenAnswer.going_on` takes the answer up where it stopped: the sentences made but never
played are said again, and the decode goes on from the answer's own words (`Request.answer_so_far`), so the
answer is not cut short by a false interruption.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace

from fastvlm.engine.cancel import CancelToken
from fastvlm.engine.events import Request
from fastvlm.speech import SentenceChunker

from .speech_queue import SpeechQueue


@dataclass
class SpokenAnswer:
    """`request`'s answer: its text so far, cut into sentences for `queue` to speak."""

    request: Request
    chunker: SentenceChunker
    queue: SpeechQueue
    token: CancelToken = field(default_factory=CancelToken)  # stops its decode, a prefill too
    text: str = ""  # the answer's words as streamed so far (after `request.answer_so_far`)
    finished: bool = False  # the engine ended it (not stopped part way)
    spoken_over: bool = False  # speech over it became a question (which stopped it)
    settled: threading.Event = field(default_factory=threading.Event)  # its stream is over, the text final

    def heard(self, text: str) -> None:
        """More of the answer's text: each sentence it completes is spoken."""
        self.text += text
        for sentence in self.chunker.feed(text):
            self.queue.say(sentence)

    def ended(self) -> None:
        """The engine ended the answer: its last words are spoken too."""
        self.finished = True
        self.queue.say(self.chunker.flush())

    def stop(self) -> None:
        self.token.cancel()

    @property
    def unheard_cut(self) -> bool:
        """Speech stopped it before any of it was played."""
        return self.spoken_over and self.queue.taken == 0

    @property
    def words(self) -> str:
        """The whole answer so far."""
        return self.request.answer_so_far + self.text

    def again(self, queue: SpeechQueue, chunker: SentenceChunker, decode: bool = True,
              settle_s: float = 1.0) -> SpokenAnswer | None:
        """This answer said again into `queue` from its start, cut anew by `chunker`; then, if the engine had not
        ended it (and `decode`), what a continuation of its decode says. None when it has no words, or when its
        stream did not end within `settle_s`."""
        if not self.settled.wait(settle_s) or not self.words.strip():
            return None
        for sentence in chunker.feed(self.words):
            queue.say(sentence)
        rest = SpokenAnswer(replace(self.request, answer_so_far=self.words), chunker, queue)
        if self.finished or not decode:
            rest.ended()
            rest.settled.set()
        return rest

    def going_on(self, queue: SpeechQueue, decode: bool = True, settle_s: float = 1.0) -> SpokenAnswer | None:
        """The rest of this answer, spoken into `queue`: first what was made but never played, then (if the
        engine had not ended it, and `decode`) what a continuation of its decode says. None when nothing is
        left, or when its stream did not end within `settle_s` (its text would not be final)."""
        if not self.settled.wait(settle_s):
            return None
        unspoken = self.queue.unspoken()
        if self.finished and not unspoken:
            return None
        for sentence in unspoken:
            queue.say(sentence)
        rest = SpokenAnswer(replace(self.request, answer_so_far=self.words), self.chunker, queue)
        if self.finished or not decode:  # nothing more to decode (or no way to): only what is left is said
            rest.ended()
            rest.settled.set()
        return rest
