"""A spoken question follows on from the conversation: the last `voice_history_turns` questions and answers (up to
twice as many less one: the window moves that many at a time) go with it, before its frame ("What is written on
it?" after "What am I holding?"), and are prefilled with its frame while it is spoken; Stop ends the conversation
(fakes; the prompt's layout is tests/unit/engine/test_prepare_history.py)."""

import time
from dataclasses import replace

import numpy as np

from fastvlm.engine.prompt import Turn
from ui.voice.listening import BargeIn, listen
from ui.voice.prepare import prepare
from ui.voice.events import Answering, Heard
from ui.voice.turn import answer_turn
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, FakeTranscriber, asked, make_engine, make_models, voice

ANSWER = "You hold a red cup. It looks full. That is all."


def recording(engine) -> list:
    requests, stream = [], engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append(request) or stream(request, wait, cancel)
    return requests


def text_of(prompt: list) -> bytes:
    """A prompt's plain-text tokens (the fake's are bytes; image positions and markers left out)."""
    return bytes(t for t in prompt if isinstance(t, int) and t < 256)


def ask_again(session, transcriber, text: str) -> None:
    transcriber.text = text
    session.ask(voice(1.0), time.monotonic())


def test_each_question_carries_the_turns_before_it_the_window_moving_the_setting_at_a_time(tmp_path):
    """At least the last `voice_history_turns` (2) turns, at most 3: the turns before the frame stay the same from
    one question to the next (only the newest is added) save when the window moves on by 2."""
    engine, transcriber = make_engine(), FakeTranscriber("What am I holding?")
    models, requests = make_models(tmp_path, transcriber), recording(engine)
    settings = replace(SETTINGS, voice_history_turns=2)
    session = asked(models)
    list(answer_turn(engine, models, session, settings))
    questions = ("What is written on it?", "Is it full?", "What colour is it?", "Is it hot?", "Who made it?")
    for question in questions:
        ask_again(session, transcriber, question)
        list(answer_turn(engine, models, session, settings))
    turns = [Turn(q, ANSWER) for q in ("What am I holding?", *questions)]
    assert [r.history for r in requests] == [
        (), tuple(turns[:1]), tuple(turns[:2]), tuple(turns[:3]),
        tuple(turns[2:4]),  # 4 would be twice the setting: the 2 newest, and the window grows from them again
        tuple(turns[2:5]),
    ]
    assert all(r.image_with_question for r in requests)  # the frame goes with its question, after the turns
    assert b"What am I holding?" not in text_of(engine.lm.prefills[-1])  # the oldest turns are not in the prompt
    assert b"Is it full?" in text_of(engine.lm.prefills[-1])


def test_with_no_turns_kept_every_question_stands_alone(tmp_path):
    engine, transcriber = make_engine(), FakeTranscriber()
    models, requests = make_models(tmp_path, transcriber), recording(engine)
    settings = replace(SETTINGS, voice_history_turns=0)
    session = asked(models)
    list(answer_turn(engine, models, session, settings))
    ask_again(session, transcriber, "What is written on it?")
    list(answer_turn(engine, models, session, settings))
    assert [r.history for r in requests] == [(), ()]


def test_stop_ends_the_conversation(tmp_path):
    engine, transcriber = make_engine(), FakeTranscriber()
    models, requests = make_models(tmp_path, transcriber), recording(engine)
    session = asked(models)
    list(answer_turn(engine, models, session, SETTINGS))
    session.stop()
    session.listen(models.turn_taker())
    ask_again(session, transcriber, "What is written on it?")
    list(answer_turn(engine, models, session, SETTINGS))
    assert requests[-1].history == () and session.conversation(3) == (Turn("What is written on it?", ANSWER),)


def test_an_answer_cut_off_by_the_next_question_is_in_its_history_as_far_as_it_was_decoded(tmp_path):
    engine, transcriber = make_engine(b"x" * 400, delay=0.005), FakeTranscriber("Count for me.")
    models, requests = make_models(tmp_path, transcriber), recording(engine)
    session = asked(models)
    turn = answer_turn(engine, models, session, SETTINGS)
    assert isinstance(next(turn), Heard) and isinstance(next(turn), Answering)
    session.playing_until = time.monotonic() + 10  # a sentence is playing
    transcriber.text = "Stop, what colour is it?"
    for i in range(0, int(1.5 * RATE), 1600):  # the person talks over it, then stops: the next question
        chunk = np.concatenate([voice(1.0), np.zeros(RATE // 2, np.float32)])[i:i + 1600]
        listen(session, RATE, chunk, SETTINGS.voice_echo_margin_s, settle_s=1.0, barge_in=BargeIn())
    list(turn)  # stopped at its next token
    cut = session.answer.words
    assert 0 < len(cut) < 400
    list(answer_turn(engine, models, session, SETTINGS))
    assert requests[-1].question == "Stop, what colour is it?"
    assert requests[-1].history == (Turn("Count for me.", cut),)


def test_the_frame_is_prepared_with_the_conversation_the_question_will_carry(tmp_path):
    """What `prepare` puts in the KV cache while the question is spoken is the start of its prompt, turns and
    all, so the answer prefills only the question."""
    engine, transcriber = make_engine(), FakeTranscriber()
    models = make_models(tmp_path, transcriber)
    session = asked(models)
    list(answer_turn(engine, models, session, SETTINGS))
    session.question_frame = session.frame  # the next question starts: its frame is prepared from its first sound
    prepare(engine, session, None, turns=SETTINGS.voice_history_turns)
    prepared = engine.lm.prefills[-1]
    ask_again(session, transcriber, "What is written on it?")
    list(answer_turn(engine, models, session, SETTINGS))
    asked_prompt = engine.lm.prefills[-1]
    assert ANSWER.encode() in text_of(prepared)  # the turn before was prefilled ahead
    assert asked_prompt[: len(prepared)] == prepared
