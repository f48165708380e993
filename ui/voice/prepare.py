"""The question's camera frame prepared (encoded and prefilled) while it is spoken, then its words so far.

The voice line calls `prepare` in a thread of its own at the first sound of speech (and again when the question
is sure to have started), and for each `HeardSoFar` (fastvlm/speech/ahead.py) with the words heard so far.
"""

from __future__ import annotations

import logging
import time

from fastvlm.engine.events import InputError

from ..backend import Backend
from .session import VoiceSession

log = logging.getLogger(__name__)


def prepare(engine: Backend, session: VoiceSession, resolution: int | None, start_s: float | None = None,
            words: str = "", turns: int = 0, retries: int = 5) -> None:
    """Speech started: encode and prefill the question's frame while the person talks. The engine only does
    that when idle; an answer cut off by this question frees it within a token, so a refusal is retried briefly.
    Once the frame of the question that began at `start_s` is prepared, its words are heard ahead
    (`TurnTaker.want_words`); `words` (a `HeardSoFar`) are prefilled after the frame, tried once (more come).
    The conversation's turns (`VoiceSession.conversation`) go before the frame, as the question's request has them."""
    frame, history = session.question_frame, session.conversation(turns)
    try:
        for _ in range(1 if words else retries):
            if frame is None or session.question_frame is not frame:
                return
            if engine.prepare(frame, resolution, words=words, history=history, image_with_question=True):
                if not words and start_s is not None and session.taker is not None:
                    session.taker.want_words(start_s)
                return
            if not words:
                time.sleep(0.1)
    except InputError as e:
        log.info("the camera frame cannot be used: %s", e)
