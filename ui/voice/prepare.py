"""The question's camera frame prepared (encoded and prefilled) while it is spoken, then its words so far.

The voice line calls `prepare` in a thread of its own at the first sound of speech (and again when the question
is sure to have started), and for each `HeardSoFar` (fastvlm/speech/ahead.py) with the words heard so far. Once an
answer is decoded, `prepare_turns` prefills the turns the next question will carry while the answer is spoken.
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


def prepare_turns(engine: Backend, session: VoiceSession, resolution: int | None, turns: int) -> None:
    """An answer was decoded and is being spoken: until the next question the engine is idle, so the turns that
    question will carry (`VoiceSession.conversation`) are prefilled now, without a frame (the next question's
    own, known only when it is spoken, is encoded then: encoding one now would only take the CPU from hearing
    the person, who may speak over the answer). The turns are the start of the next question's prompt and stay
    in the KV cache; that question's frame then costs its prepare alone. A question (or its prepare) preempts
    this one. Nothing without a camera (no question can be answered)."""
    latest = session.answer
    if latest is None or not latest.finished or session.question_frame is not None or session.frame is None:
        return  # stopped part way (Stop, or a question over it), or the next question has begun: its prepare runs
    history = session.conversation(turns)
    if not history:
        return
    try:
        engine.prepare(None, resolution, history=history, image_with_question=True)
    except InputError as e:  # a size the vision graph does not serve: the question will say so
        log.info("the turns cannot be prepared: %s", e)
