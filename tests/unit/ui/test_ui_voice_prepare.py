"""The question's frame prepared while it is spoken (ui/voice/prepare.py), on an engine that refuses a given
number of times: retried briefly for a frame, once for words; never for no frame or a frame a newer question
replaced; its words wanted only once the frame is prepared. Once an answer is decoded, the next question's turns
before the latest frame."""

import numpy as np
import pytest

from fastvlm import InputError, Request, Turn
from ui.voice import prepare as preparing
from ui.voice.prepare import prepare, prepare_turns
from ui.voice.session import VoiceSession
from ui.voice.spoken import SpokenAnswer

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


class Recording:
    def __init__(self):
        self.prepared = []

    def prepare(self, frame, resolution, words="", history=(), image_with_question=False):
        self.prepared.append((frame, history, image_with_question))
        return True


def spoken_answer(finished=True) -> SpokenAnswer:
    answer = SpokenAnswer(Request(FRAME, "What colour?", (Turn("What is it?", "A cup."),)), chunker=None, queue=None,
                          text="Red.")
    answer.finished = finished
    return answer


def test_once_an_answer_is_decoded_the_turns_the_next_question_carries_are_prepared_without_a_frame():
    """The next question's frame is not known yet; encoding the latest one would take the CPU from hearing the
    person while the answer is spoken (barge-in), for a frame no question asks about."""
    engine, latest = Recording(), np.ones((4, 4, 3), np.uint8)
    prepare_turns(engine, VoiceSession(answer=spoken_answer(), frame=latest), 512, turns=3)
    assert engine.prepared == [(None, (Turn("What is it?", "A cup."), Turn("What colour?", "Red.")), True)]


@pytest.mark.parametrize("session", [
    VoiceSession(answer=spoken_answer(finished=False), frame=FRAME),  # stopped part way: Stop, a question over it
    VoiceSession(answer=spoken_answer(), frame=FRAME, question_frame=FRAME),  # the next question has begun
    VoiceSession(answer=spoken_answer(), frame=None),  # no camera frame
    VoiceSession(answer=None, frame=FRAME),  # no answer yet, or Stop ended the conversation
])
def test_no_turns_are_prepared_after_a_stopped_answer_once_a_question_began_or_without_a_frame(session):
    engine = Recording()
    prepare_turns(engine, session, 512, turns=3)
    assert engine.prepared == []
    prepare_turns(engine, VoiceSession(answer=spoken_answer(), frame=FRAME), 512, turns=0)  # no conversation
    assert engine.prepared == []


def test_a_size_the_engine_refuses_is_logged_not_raised_into_the_page(caplog):
    class Refuses:
        def prepare(self, frame, resolution, words="", history=(), image_with_question=False):
            raise InputError("resolution 500 is not served")

    caplog.set_level("INFO", logger="ui.voice.prepare")
    prepare_turns(Refuses(), VoiceSession(answer=spoken_answer(), frame=FRAME), 500, turns=3)
    assert "the turns cannot be prepared: resolution 500 is not served" in caplog.text
