"""Speech over an answer still being decoded stops the decode at once; when that speech asked nothing (a cough,
an echo), the answer goes on from where it stopped, to its end, instead of ending where it was cut (fakes)."""

import time
import warnings
from dataclasses import replace

import numpy as np

from fastvlm import EngineConfig
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import Request
from fastvlm.engine.prompt import Turn
from fastvlm.speech import SentenceChunker, SpeechUnavailable
from tests.fakes import SPECIAL, FakeLM, FakeVision
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, FakeTranscriber, asked, make_models, voice
from tests.unit.ui.test_ui_voice_tab import on_line, pcm
from ui.voice.tab import answer
from ui.voice.speech_queue import SpeechQueue
from ui.voice.spoken import SpokenAnswer
from ui.voice.events import Answering
from ui.voice.turn import answer_turn

SCRIPT = b"One two three four. Five six seven eight. Nine ten eleven. Twelve."


class ContinuingLM(FakeLM):
    """Says `script` from wherever the prompt's answer stands: a prompt that ends with its first n bytes after
    the assistant's header gets the rest (any other prompt, the whole script)."""

    def generate(self, options, seed=0):
        ids = self.prefills[-1]
        header = len(ids) - ids[::-1].index(SPECIAL["<|im_start|>"]) + len(b"assistant\n")
        so_far = bytes(ids[header:])
        self.script = SCRIPT.removeprefix(so_far)  # (a prompt that is no continuation: all of it)
        return super().generate(options, seed)


def engine_saying(delay: float, continues: bool = True) -> Engine:
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    engine = Engine(FakeVision(), ContinuingLM(SCRIPT, delay=delay), config)
    engine.continues_answers = continues
    return engine


def interrupted(tmp_path, engine: Engine, chars: int, sounding: bool = True, asked_at: list | None = None,
                heard: str = ""):
    """A question's answer streams over the line; once `chars` of it are shown and its sound plays, the person
    coughs over it (0.4 s of sound that becomes a question Whisper hears no words in, or `heard`). (models, session,
    messages to the page, seconds until the engine was idle, not waiting for the answer's own turn to look).
    `asked_at` gets the seconds of quiet after the cough at which the page was told its question was over."""
    transcriber = FakeTranscriber("What do you count?")
    models = make_models(tmp_path, transcriber)
    session = asked(models)
    _, sent = on_line(session)
    turn = answer_turn(engine, models, session, SETTINGS)
    events = []
    while not any(isinstance(e, Answering) and len(e.part.text) >= chars for e in events):
        events.append(next(turn))
    if sounding:
        session.playing_until = time.monotonic() + 10  # its first sentence plays
    transcriber.text = heard
    for k, frame in enumerate(np.split(np.concatenate([voice(0.4), np.zeros(3 * RATE)]), 85)):  # 40 ms each
        asks = sum(1 for m in sent if isinstance(m, dict) and m["type"] == "ask")
        session.link.hear(pcm(frame))
        if asked_at is not None and sum(1 for m in sent if isinstance(m, dict) and m["type"] == "ask") > asks:
            asked_at.append((k + 1) * 0.04 - 0.4)
    t = time.monotonic()
    while engine.busy and time.monotonic() - t < 2:
        time.sleep(0.005)
    idle_after = time.monotonic() - t
    list(turn)
    return models, session, sent, idle_after


def wait_spoken(session, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not session.speech.done and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session.speech.done


def spoken(models) -> str:
    """What the speaker was asked to say, a sentence made twice (dropped at the stop, said again) once."""
    texts = models.speaker.texts
    return " ".join(t for i, t in enumerate(texts) if i == 0 or t != texts[i - 1])


def test_speech_over_the_answer_stops_its_decode_at_once(tmp_path):
    engine = engine_saying(delay=0.05)
    _, session, sent, idle_after = interrupted(tmp_path, engine, chars=8)
    assert [m["type"] for m in sent if isinstance(m, dict)][-3:] == ["pause", "start", "ask"]
    assert idle_after < 0.5 and engine.lm.evaluated < 20  # within a token or two (0.05 s each), not at the end
    assert session.answer.settled.is_set() and not session.answer.finished


def test_an_answer_stopped_by_speech_that_asked_nothing_goes_on_to_its_end(tmp_path):
    engine = engine_saying(delay=0.02)
    models, session, sent, _ = interrupted(tmp_path, engine, chars=22)
    stopped_at = session.answer.text
    assert 22 <= len(stopped_at) < len(SCRIPT) - 10, stopped_at
    updates = list(answer(engine, models, session, SETTINGS))
    assert "Speaking" in updates[0]["status"] and {"type": "resume"} in sent
    shown = [u["answer"] for u in updates if "answer" in u]
    assert shown[-1] == SCRIPT.decode()  # the whole answer, not only the rest
    assert all(s.startswith(stopped_at) for s in shown)
    assert bytes(engine.lm.prefills[-1][-len(stopped_at):]) == stopped_at.encode()  # went on from its own words
    wait_spoken(session)
    assert spoken(models) == SCRIPT.decode()  # every word said once, in order
    assert not [m for m in sent if isinstance(m, dict) and m["type"] == "hush" and m["turn"] > 1]
    assert session.conversation(3) == (Turn("What do you count?", SCRIPT.decode()),)  # one turn, the whole answer


def test_a_cough_over_the_answer_is_over_at_the_confirming_silence_not_at_the_fallback(tmp_path):
    engine, asked_at = engine_saying(delay=0.02), []
    models, session, _, _ = interrupted(tmp_path, engine, chars=22, asked_at=asked_at)
    config = models.config
    assert len(asked_at) == 1, asked_at
    assert config.turn_confirm_silence_ms / 1000 <= asked_at[0] <= (config.turn_confirm_silence_ms
                                                                    + config.turn_hold_ms) / 1000 + 0.1
    assert asked_at[0] < config.turn_max_silence_ms / 1000  # not the 2 s fallback the unfinished questions wait
    updates = list(answer(engine, models, session, SETTINGS))
    assert [u["answer"] for u in updates if "answer" in u][-1] == SCRIPT.decode()  # and then it goes on


def test_an_answer_stopped_before_it_sounded_by_speech_that_asked_nothing_is_taken_up_again(tmp_path):
    engine = engine_saying(delay=0.05)
    models, session, sent, _ = interrupted(tmp_path, engine, chars=4, sounding=False)  # before its first phrase
    assert session.answer.queue.taken == 0 and not [m for m in sent if isinstance(m, bytes)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "No speech heard": nothing was asked, the answer was
        updates = list(answer(engine, models, session, SETTINGS))
    assert "Thinking" in updates[0]["status"]  # nothing of it sounds yet
    assert [u["answer"] for u in updates if "answer" in u][-1] == SCRIPT.decode()
    wait_spoken(session)
    assert spoken(models) == SCRIPT.decode()


def test_with_an_engine_that_cannot_go_on_the_words_already_decoded_are_still_said(tmp_path):
    engine = engine_saying(delay=0.02, continues=False)
    models, session, _, _ = interrupted(tmp_path, engine, chars=22)
    stopped_at, prefills = session.answer.text, len(engine.lm.prefills)
    list(answer(engine, models, session, SETTINGS))
    wait_spoken(session)
    assert len(engine.lm.prefills) == prefills  # nothing more asked of the engine
    assert spoken(models) == stopped_at.strip()


def test_an_answer_already_said_in_full_asks_nothing_more(tmp_path):
    engine = engine_saying(delay=0.0)
    models = make_models(tmp_path)
    session = asked(models)
    on_line(session)
    list(answer(engine, models, session, SETTINGS))
    wait_spoken(session)
    said = list(models.speaker.texts)
    session.playing_until = time.monotonic() + 10
    models.transcriber.text = ""
    for frame in np.split(np.concatenate([voice(0.4), np.zeros(3 * RATE)]), 85):
        session.link.hear(pcm(frame))
    updates = list(answer(engine, models, session, SETTINGS))
    assert "Speaking" in updates[0]["status"] and len(updates) == 1
    assert len(engine.lm.prefills) == 1 and models.speaker.texts == said


def test_speech_that_became_a_question_before_its_sound_was_held_holds_it_instead_of_dropping_it(tmp_path):
    """The answer began to sound while the person was already speaking (here: a hold that needs longer than a
    question does), so the question comes with nothing held: the sound is held then, and plays on if no words."""
    models = make_models(tmp_path, FakeTranscriber(""))
    session = asked(models)
    session.utterance = None  # its answer plays
    link, sent = on_line(session, replace(SETTINGS, voice_barge_in_ms=400))
    session.playing_until = time.monotonic() + 10
    for frame in np.split(np.concatenate([voice(0.6), np.zeros(3 * RATE)]), 90):
        link.hear(pcm(frame))
    kinds = [m["type"] for m in sent if isinstance(m, dict)]
    assert kinds[:3] == ["pause", "start", "ask"] and "hush" not in kinds, kinds
    updates = list(answer(engine_saying(delay=0.0), models, session, SETTINGS))
    assert "Speaking" in updates[0]["status"] and sent[-1] == {"type": "resume"}


class Unvoiced:
    def synthesize(self, text: str):
        raise SpeechUnavailable("no voice in this test")


def test_a_sentence_completed_after_the_stop_is_said_when_the_answer_goes_on():
    """The text already on its way when speech stopped the answer completes a sentence after the answer's queue
    closed: the page shows it (it is in the answer's words), so the answer that goes on says it too."""
    stopped = SpokenAnswer(Request(np.zeros((8, 8, 3), np.uint8), "q"), SentenceChunker(), SpeechQueue(Unvoiced()))
    stopped.heard("One two three. Four five")
    stopped.stop()
    stopped.queue.close()  # what a question over the answer does (`VoiceSession.interrupt`)
    stopped.heard(" six. Seven")
    stopped.settled.set()
    rest = stopped.going_on(SpeechQueue(Unvoiced()))
    assert rest.queue.sentences == ["One two three.", "Four five six."]
    assert rest.request.answer_so_far == "One two three. Four five six. Seven"
