"""Asked "Say that again?", the tab says the latest answer again from its start, asking the model nothing when
the answer was whole, going on to its end when the asking stopped its decode (fakes; fastvlm/speech/intent.py)."""

import time
import warnings
from dataclasses import replace

import numpy as np

from fastvlm.engine.events import Request
from fastvlm.engine.prompt import Turn
from fastvlm.speech import SentenceChunker
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, FakeTranscriber, asked, make_engine, make_models, voice
from tests.unit.ui.test_ui_voice_goes_on import SCRIPT, Unvoiced, engine_saying, interrupted, wait_spoken
from tests.unit.ui.test_ui_voice_tab import on_line, pcm
from tests.unit.ui.test_ui_voice_told_to_stop import warnings_of
from ui.voice.speech_queue import SpeechQueue
from ui.voice.spoken import SpokenAnswer
from ui.voice.tab import answer, status_html


def said_after(models, n: int) -> str:
    return " ".join(models.speaker.texts[n:])


def test_said_over_a_decoding_answer_it_is_said_again_from_its_start_and_goes_on_to_its_end(tmp_path):
    engine = engine_saying(delay=0.02)
    models, session, sent, _ = interrupted(tmp_path, engine, chars=22, heard="Sorry, can you say that again?")
    stopped_at, before = session.answer.text, len(models.speaker.texts)
    assert 22 <= len(stopped_at) < len(SCRIPT) - 10, stopped_at
    updates = list(answer(engine, models, session, SETTINGS))
    assert updates[0]["transcript"] == "Sorry, can you say that again?" and updates[0]["status"] == status_html(
        "thinking")
    assert "hush" in [m["type"] for m in sent if isinstance(m, dict)][-3:]  # what was held goes: said again instead
    assert [u["answer"] for u in updates if "answer" in u][-1] == SCRIPT.decode()
    assert bytes(engine.lm.prefills[-1][-len(stopped_at):]) == stopped_at.encode()  # went on from its own words
    wait_spoken(session)
    assert said_after(models, before) == SCRIPT.decode()  # all of it again, from its first word
    assert session.conversation(3) == (Turn("What do you count?", SCRIPT.decode()),)  # still one turn


def test_after_a_whole_answer_it_is_said_again_and_the_model_is_asked_nothing(tmp_path):
    engine, models = engine_saying(delay=0.0), make_models(tmp_path, FakeTranscriber("What do you count?"))
    session = asked(models)
    link, _ = on_line(session)
    list(answer(engine, models, session, SETTINGS))
    wait_spoken(session)
    before, prefills = len(models.speaker.texts), len(engine.lm.prefills)
    models.transcriber.text = "Pardon?"
    session.playing_until = time.monotonic() - 1  # it has been heard to its end
    for frame in np.split(np.concatenate([voice(0.6), np.zeros(3 * RATE)]), 90):
        link.hear(pcm(frame))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        updates = list(answer(engine, models, session, SETTINGS))
    assert updates[0]["transcript"] == "Pardon?" and "answer" not in updates[0]  # the answer shown stays
    wait_spoken(session)
    times = session.times  # the readout's: from the end of "Pardon?"
    assert times.stt_s == 0.01 and 0 <= times.asked_s <= times.begun_s <= times.first_sound_s < 5, times
    assert said_after(models, before) == SCRIPT.decode() and len(engine.lm.prefills) == prefills


def test_with_no_answer_yet_it_says_so_and_with_the_phrases_turned_off_it_is_a_question(tmp_path):
    models, engine = make_models(tmp_path, FakeTranscriber("Say that again.")), make_engine()
    warned = warnings_of(engine, models)
    assert any("Nothing was said yet to say again" in w for w in warned) and engine.lm.prefills == []
    session = asked(models)
    on_line(session)
    updates = list(answer(engine, models, session, replace(SETTINGS, voice_repeat_phrases=())))
    assert updates[0]["transcript"] == "Say that again." and len(engine.lm.prefills) == 1


def test_an_answer_with_no_words_or_whose_text_is_not_final_is_not_said_again():
    def answer_of(text: str) -> SpokenAnswer:
        spoken = SpokenAnswer(Request(np.zeros((8, 8, 3), np.uint8), "q"), SentenceChunker(), SpeechQueue(Unvoiced()))
        spoken.heard(text)
        return spoken

    quiet, streaming = answer_of(" "), answer_of("One two. Three")
    quiet.settled.set()
    assert quiet.again(SpeechQueue(Unvoiced()), SentenceChunker()) is None  # nothing to say again
    assert streaming.again(SpeechQueue(Unvoiced()), SentenceChunker(), settle_s=0.01) is None  # still streaming
    streaming.settled.set()
    queue = SpeechQueue(Unvoiced())
    rest = streaming.again(queue, SentenceChunker())
    assert queue.sentences == ["One two."] and rest.request.answer_so_far == "One two. Three" and not rest.finished
