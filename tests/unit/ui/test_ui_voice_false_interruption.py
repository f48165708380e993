"""Speech over a playing answer that became a question holds the answer's sound until the question's words are
known: words drop it (the new question is answered), none let it play on from where it stood (fakes)."""

import time
import warnings

import numpy as np
import pytest

from fastvlm.speech import Transcript
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, FakeTranscriber, asked, make_engine, make_models, voice
from tests.unit.ui.test_ui_voice_tab import on_line, pcm
from ui.voice.tab import answer, push_to_talk_started, speak, stop


def spoken_over(tmp_path, heard: str):
    """An answer sounds (10 s of it left); the person speaks 0.4 s over it, then is quiet: a question whose
    transcript is `heard`. (models, session, messages to the page, when the answer would have ended)."""
    models = make_models(tmp_path, FakeTranscriber(heard))
    session = asked(models)
    session.utterance = None  # the first question was answered; its answer is playing
    link, sent = on_line(session)
    until = session.playing_until = time.monotonic() + 10
    for frame in np.split(np.concatenate([voice(0.4), np.zeros(3 * RATE)]), 85):
        link.hear(pcm(frame))
    assert [m["type"] for m in sent] == ["pause", "start", "ask"], sent  # held, a question: not hushed yet
    assert session.questions == 2 and session.held is not None and session.playing_until == 0.0
    return models, session, sent, until


def test_a_question_with_words_over_the_answer_drops_its_sound_before_the_new_answer_sounds(tmp_path):
    models, session, sent, _ = spoken_over(tmp_path, "What color is the square?")
    engine = make_engine(b"It is red.")
    updates = list(answer(engine, models, session, SETTINGS)) + list(speak(session, SETTINGS))
    assert updates[0]["transcript"] == "What color is the square?" and session.held is None
    kinds = [m["type"] if isinstance(m, dict) else "sound" for m in sent[3:]]
    assert kinds[:2] == ["hush", "sound"], kinds  # what the page held is dropped, then the new answer plays
    assert sent[3] == {"type": "hush", "turn": session.turn} and len(engine.lm.prefills) == 1


@pytest.mark.parametrize("heard", ["", "Uh."])  # Whisper heard nothing, or only a hesitation
def test_speech_over_the_answer_with_no_words_lets_the_answer_play_on_without_a_warning(tmp_path, heard):
    models, session, sent, until = spoken_over(tmp_path, heard)
    engine = make_engine()
    held_at = session.held.at
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "No speech heard" toast over an answer that goes on
        updates = list(answer(engine, models, session, SETTINGS))
    assert updates == [{"status": updates[0]["status"]}] and "Speaking" in updates[0]["status"]
    assert sent[-1] == {"type": "resume"} and not [m for m in sent if m.get("type") == "hush"]
    assert session.held is None and engine.lm.prefills == []  # nothing was asked of the model
    assert until < session.playing_until <= until + (time.monotonic() - held_at)  # on by as long as it was held


@pytest.mark.parametrize(("heard", "warning"), [("", "No speech heard"), ("Um...", "Heard only “Um...”")])
def test_no_words_with_nothing_held_is_still_a_warning_and_asks_nothing(tmp_path, heard, warning):
    models, engine = make_models(tmp_path, FakeTranscriber(heard)), make_engine()
    session = asked(models)
    _, sent = on_line(session)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        list(answer(engine, models, session, SETTINGS))
    assert any(warning in str(w.message) for w in warned) and sent == [] and engine.lm.prefills == []


def test_stop_drops_a_sound_held_for_a_question(tmp_path):
    _, session, sent, _ = spoken_over(tmp_path, "What color is the square?")
    stop(session)
    assert sent[-1] == {"type": "hush", "turn": session.turn} and session.held is None


def test_push_to_talk_drops_a_sound_held_for_a_question(tmp_path):
    _, session, sent, _ = spoken_over(tmp_path, "")
    push_to_talk_started(session)
    assert sent[-1] == {"type": "hush", "turn": session.turn} and session.held is None


class ByLength:
    """Hears the question in a second or more of audio, `short` in less (a cough: "Um."); `during` runs once
    while the question is transcribed."""

    def __init__(self, short: str = "Um."):
        self.short, self.during = short, None

    def transcribe(self, audio):
        if audio.size < 0.7 * RATE:
            return Transcript(self.short, "en", audio.size / RATE, elapsed_s=0.01)
        during, self.during = self.during, None
        if during is not None:
            during()
        return Transcript("What am I holding?", "en", audio.size / RATE, elapsed_s=0.01)


def speak_over(link, seconds: float = 0.4) -> None:
    for frame in np.split(np.concatenate([voice(seconds), np.zeros(3 * RATE)]), (seconds + 3) / 0.04):
        link.hear(pcm(frame))


@pytest.mark.parametrize("when", ["asked", "transcribed"])  # before `answer_turn` took it, or while it hears it
def test_a_cough_while_a_question_waits_for_its_answer_stops_nothing_and_asks_nothing(tmp_path, when):
    transcriber = ByLength()
    models, engine = make_models(tmp_path, transcriber), make_engine()
    session = asked(models)
    link, sent = on_line(session)
    turn = session.turn
    if when == "asked":
        speak_over(link)
    else:
        transcriber.during = lambda: speak_over(link)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'Heard only "Um."'
        updates = list(answer(engine, models, session, SETTINGS))
    assert [m["type"] for m in sent if isinstance(m, dict)] == ["start"]  # no hush, no second question
    assert session.turn == turn and session.questions == 1 and session.utterance is None
    assert updates[0]["transcript"] == "What am I holding?"
    assert [u["answer"] for u in updates if "answer" in u][-1] == "You hold a red cup. It looks full. That is all."


def test_a_question_with_words_while_another_waits_for_its_answer_is_the_next_question(tmp_path):
    models, engine = make_models(tmp_path, ByLength(short="Where is it?")), make_engine(b"Here.")
    session = asked(models)
    link, sent = on_line(session)
    speak_over(link)
    assert [m["type"] for m in sent if isinstance(m, dict)] == ["start", "hush", "ask"] and session.questions == 2
    updates = list(answer(engine, models, session, SETTINGS))
    assert updates[0]["transcript"] == "Where is it?" and [u["answer"] for u in updates if "answer" in u][-1] == "Here."
