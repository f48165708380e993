"""A question spoken on after its turn ended: its rest goes on with it (`AppSettings.voice_continue_s`).

People pause longer mid-question than the end of turn waits ("And I say, [0.51 s] what in the world…" ends at "And
I see."). Speech with words begun within `voice_continue_s` of a question's end is its rest: `joined` hears it with
a first part still waiting to be taken up (the engine busy with others), `put` asks it with a first part already
put to the model, as one question about that part's frame and after its conversation.
"""

from __future__ import annotations

import logging

import numpy as np

from .session import Asked, Utterance, VoiceSession

log = logging.getLogger(__name__)


def joined(u: Utterance, within_s: float) -> Utterance:
    """`u` with the question it replaced before that was taken up, when `u` began within `within_s` of its end (the
    rest of it, said while the engine was busy with others): one recording, about the first part's frame."""
    first = u.replaced
    if within_s <= 0 or first is None or first.span is None or u.span is None or u.span[0] - first.span[1] > within_s:
        return u
    first = joined(first, within_s)
    return Utterance(np.concatenate([first.audio, u.audio]), first.frame, u.ended_at, None, u.asked_at, u.cut,
                     (first.span[0], u.span[1]))


def put(session: VoiceSession, u: Utterance, text: str, turns: int, within_s: float) -> Asked:
    """What is put to the model for `u`: its words after the conversation's last `turns` turns, or, spoken on within
    `within_s` of the question before (a pause longer than the end of turn waits), that question and these words as
    one, about its frame and after its conversation. Kept as `session.asked` for a question that goes on from it."""
    last = _went_on_from(session.asked, u, within_s)
    if last is not None:
        log.info("voice turn %d: goes on from %r", session.turn, last.question)
        asked = Asked(f"{last.question} {text}", last.history, last.frame, *u.span, before=last)
    else:
        asked = Asked(text, session.conversation(turns), u.frame, *(u.span or (0.0, 0.0)))
    if u.span is not None:
        session.asked = asked
    return asked


def _went_on_from(last: Asked | None, u: Utterance, within_s: float) -> Asked | None:
    """The question `u` continues: `last`, the latest one asked, if `u` began within `within_s` of its end. An
    earlier take of `u` itself (answered at a verdict, then spoken on) is not one: the question before that is."""
    while last is not None and u.span is not None and last.start_s >= u.span[0]:
        last = last.before
    if within_s <= 0 or last is None or u.span is None or u.span[0] - last.end_s > within_s:
        return None
    return last
