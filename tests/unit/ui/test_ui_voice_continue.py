"""A question spoken on after its turn ended (a pause longer than the end of turn waits): the two parts are one
question, about the first part's frame and after its conversation (`voice_continue_s`; fakes, no models)."""

import time
from dataclasses import replace

import numpy as np

from fastvlm.speech import Transcript
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, make_engine, make_models, voice
from ui.voice.session import VoiceSession
from ui.voice.tab import answer

FRAME = np.full((48, 64, 3), 120, np.uint8)
LATER = np.zeros_like(FRAME)  # the camera moved on


class Said:
    """Hears each recording as the next of `texts`."""

    def __init__(self, *texts):
        self.texts = list(texts)

    def transcribe(self, audio):
        return Transcript(self.texts.pop(0), "en", audio.size / RATE, elapsed_s=0.01)


def _asking(tmp_path, *texts):
    """A listening session whose engine records every request, and that request list."""
    engine, models = make_engine(b"A cup."), make_models(tmp_path, Said(*texts))
    requests, stream = [], engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append(request) or stream(request, wait, cancel)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(likely_events=True))
    return engine, models, session, requests


def _ask(engine, models, session, span, settings=SETTINGS, **held):
    session.ask(voice(span[1] - span[0]), time.monotonic(), span=span, **held)
    return list(answer(engine, models, session, settings))


def test_speech_begun_soon_after_a_question_ended_is_the_rest_of_it(tmp_path):
    """People's "And I say, [1.0 s] what in the world do they know…": the end of turn took "And I see." as the
    question; the rest, 0.9 s later, is asked with it: one question, about the frame and conversation it began with."""
    engine, models, session, requests = _asking(tmp_path, "Hi there.", "And I see.", "what in the world is it?")
    _ask(engine, models, session, (0.5, 1.2))  # a question answered before
    _ask(engine, models, session, (4.0, 5.0))  # "And I see."
    session.frame = LATER
    updates = _ask(engine, models, session, (5.9, 7.4))
    first, cut, whole = requests
    assert whole.question == "And I see. what in the world is it?" and whole.image is FRAME
    assert whole.history == cut.history and len(cut.history) == 1 and cut.history[0].question == "Hi there."
    assert any(u.get("transcript") == whole.question for u in updates)  # the page shows the whole question


def test_speech_begun_later_is_a_question_of_its_own_after_the_last(tmp_path):
    engine, models, session, requests = _asking(tmp_path, "And I see.", "What is it?")
    _ask(engine, models, session, (4.0, 5.0))
    session.frame = LATER
    _ask(engine, models, session, (6.6, 7.4))  # 1.6 s after: over voice_continue_s (1.5 s)
    assert requests[1].question == "What is it?" and requests[1].image is LATER
    assert [t.question for t in requests[1].history] == ["And I see."]


def test_a_question_spoken_on_after_its_verdict_is_not_its_own_continuation(tmp_path):
    """Answered at the judge's verdict at 1.5 s, then spoken on: the whole question is asked alone, not after
    its own first take; it goes on from the question before, if that ended just before it."""
    engine, models, session, requests = _asking(tmp_path, "Look.", "What is", "What is written on the sign?")
    _ask(engine, models, session, (0.2, 0.8))
    _ask(engine, models, session, (1.5, 2.5), held_end_s=2.5)  # 0.7 s after "Look."
    session.resume(2.5)
    _ask(engine, models, session, (1.5, 4.0))
    assert [r.question for r in requests] == ["Look.", "Look. What is", "Look. What is written on the sign?"]


def test_continuing_is_off_at_zero_and_forgotten_at_stop(tmp_path):
    engine, models, session, requests = _asking(tmp_path, "One.", "Two.", "Three.")
    off = replace(SETTINGS, voice_continue_s=0)
    _ask(engine, models, session, (0.5, 1.0), off)
    _ask(engine, models, session, (1.2, 2.0), off)
    session.stop()
    session.listen(models.turn_taker(likely_events=True))
    _ask(engine, models, session, (2.1, 3.0))
    assert [r.question for r in requests] == ["One.", "Two.", "Three."]


class ByLength:
    """Hears a long recording as the cut question and a short one as its rest (any number of times)."""

    def transcribe(self, audio):
        text = "And I see." if audio.size > 1.6 * RATE else "what is it?"  # the speech and its padding
        return Transcript(text, "en", audio.size / RATE, elapsed_s=0.01)


def test_over_the_line_the_rest_of_a_question_after_its_end_is_asked_with_it(tmp_path):
    from tests.unit.ui.test_ui_voice_tab import on_line, pcm
    from ui.voice.links import VoiceLinks
    from ui.voice.tab import open_line

    engine, models = make_engine(b"A cup."), make_models(tmp_path, ByLength())
    requests, stream = [], engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append(request) or stream(request, wait, cancel)
    session = VoiceSession(frame=FRAME)
    open_line(VoiceLinks(SETTINGS), models, session)
    link, _ = on_line(session)
    for part, then_answer in ((voice(2.0), False), (np.zeros(RATE), True), (voice(0.4), False),
                              (np.zeros(RATE), True)):  # the rest begins 1.0 s after the end: within 1.5 s
        for frame in np.array_split(part, part.size // 640):
            link.hear(pcm(frame))
        if then_answer:
            list(answer(engine, models, session, SETTINGS))
    assert [r.question for r in requests] == ["And I see.", "And I see. what is it?"]


class Whole:
    """Hears 2 s or more as the whole question, less as its rest alone."""

    def transcribe(self, audio):
        text = "And I say, what is it?" if audio.size >= 2 * RATE else "what is it?"
        return Transcript(text, "en", audio.size / RATE, elapsed_s=0.01)


def test_the_rest_asked_before_the_first_part_was_taken_up_is_heard_with_it(tmp_path):
    """A busy server (another person's answer holds the engine group) has not taken up "And I say," when its rest
    is asked: the rest no longer replaces it, the two are heard as one recording, about the first part's frame."""
    engine, models = make_engine(b"A cup."), make_models(tmp_path, Whole())
    requests, stream = [], engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append(request) or stream(request, wait, cancel)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(likely_events=True))
    session.ask(voice(1.0), time.monotonic(), span=(4.0, 5.0))  # not taken up yet
    session.frame = LATER
    session.ask(voice(1.2), time.monotonic(), span=(5.9, 7.1))
    list(answer(engine, models, session, SETTINGS))
    assert [(r.question, r.image is FRAME) for r in requests] == [("And I say, what is it?", True)]
    session.ask(voice(1.0), time.monotonic(), span=(9.0, 10.0))
    session.ask(voice(1.2), time.monotonic(), span=(11.6, 12.8))  # 1.6 s after: a question of its own, as before
    list(answer(engine, models, session, SETTINGS))
    assert requests[-1].question == "what is it?" and requests[-1].image is LATER


def test_a_rest_answered_at_its_verdict_and_spoken_on_leaves_the_first_part_waiting_again(tmp_path):
    engine, models = make_engine(b"A cup."), make_models(tmp_path, Whole())
    requests, stream = [], engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append(request) or stream(request, wait, cancel)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(likely_events=True))
    session.ask(voice(1.0), time.monotonic(), span=(4.0, 5.0))
    first = session.utterance
    session.ask(voice(0.5), time.monotonic(), span=(5.9, 6.4), held_end_s=6.4)  # the rest, at a verdict
    session.resume(6.4)  # spoken on before it was taken up
    assert session.utterance is first
    session.ask(voice(1.2), time.monotonic(), span=(5.9, 7.1))
    list(answer(engine, models, session, SETTINGS))
    assert [(r.question, r.image is FRAME) for r in requests] == [("And I say, what is it?", True)]
