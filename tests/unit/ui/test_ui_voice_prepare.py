"""The question's frame prepared while it is spoken (ui/voice/prepare.py), on an engine that refuses a given
number of times: retried briefly for a frame, once for words; never for no frame or a frame a newer question
replaced; its words wanted only once the frame is prepared."""

import numpy as np
import pytest

from ui.voice import prepare as preparing
from ui.voice.prepare import prepare
from ui.voice.session import VoiceSession

FRAME = np.zeros((4, 4, 3), np.uint8)


class Refusing:
    """An engine busy for its first `refusals` prepares."""

    def __init__(self, refusals=0, on_prepare=None):
        self.refusals, self.asked, self.on_prepare = refusals, [], on_prepare

    def prepare(self, frame, resolution, words="", history=(), image_with_question=False):
        self.asked.append((frame, words))
        if self.on_prepare is not None:
            self.on_prepare()
        return len(self.asked) > self.refusals


class Taker:
    def __init__(self):
        self.wanted = []

    def want_words(self, start_s):
        self.wanted.append(start_s)


@pytest.fixture
def slept(monkeypatch):
    sleeps = []
    monkeypatch.setattr(preparing.time, "sleep", sleeps.append)
    return sleeps


def session_with(frame=FRAME) -> VoiceSession:
    session = VoiceSession(question_frame=frame)
    session.taker = Taker()
    return session


def test_a_frame_refused_while_the_engine_frees_is_tried_again_every_tenth_of_a_second(slept):
    engine, session = Refusing(refusals=4), session_with()
    prepare(engine, session, 512, start_s=1.5)
    assert len(engine.asked) == 5 and slept == [0.1] * 4 and session.taker.wanted == [1.5]


def test_words_are_tried_once_and_never_ask_for_more_words(slept):
    engine, session = Refusing(refusals=1), session_with()
    prepare(engine, session, 512, start_s=1.5, words="What is")
    assert engine.asked == [(FRAME, "What is")] and slept == []
    prepare(Refusing(), session, 512, start_s=1.5, words="What is")
    assert session.taker.wanted == []


def test_no_frame_or_a_frame_replaced_by_a_newer_question_is_not_prepared(slept):
    engine = Refusing()
    prepare(engine, session_with(None), 512, start_s=0.0)
    assert engine.asked == []
    session = session_with()
    engine = Refusing(refusals=5, on_prepare=lambda: setattr(session, "question_frame", FRAME.copy()))
    prepare(engine, session, 512, start_s=0.0)
    assert len(engine.asked) == 1  # the next try sees the newer question's frame and gives it up
