"""Said over the answer, "Stop." stops it for good and asks nothing; "Okay." asks nothing and lets it play on; a
question with "stop" in it is a question (fakes; the phrases: fastvlm/speech/intent.py)."""

import warnings
from dataclasses import replace

from fastvlm.engine.prompt import Turn
from fastvlm.speech import Transcript
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, FakeTranscriber, asked, make_engine, make_models
from tests.unit.ui.test_ui_voice_false_interruption import speak_over, spoken_over
from tests.unit.ui.test_ui_voice_goes_on import engine_saying, interrupted
from tests.unit.ui.test_ui_voice_tab import on_line
from ui.voice.tab import answer, speak, status_html


def kinds(sent) -> list[str]:
    return [m["type"] if isinstance(m, dict) else "sound" for m in sent]


def warnings_of(engine, models) -> list[str]:
    """The warnings a question just asked gives as it is answered over an open line, nothing playing."""
    session = asked(models)
    on_line(session)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        list(answer(engine, models, session, SETTINGS))
    return [str(w.message) for w in warned]


def test_stop_said_over_a_decoding_answer_stops_it_for_good_and_asks_nothing(tmp_path):
    engine = engine_saying(delay=0.02)
    models, session, sent, _ = interrupted(tmp_path, engine, chars=22, heard="Okay, stop.")
    stopped_at, prefills, told = session.answer.text, len(engine.lm.prefills), len(sent)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no toast: the person asked for this
        updates = list(answer(engine, models, session, SETTINGS))
    assert updates == [{"transcript": "Okay, stop.", "status": status_html("listening")}]
    assert kinds(sent[told:]) == ["hush"] and sent[-1]["turn"] == session.turn  # what was held is dropped
    assert len(engine.lm.prefills) == prefills and not engine.busy  # neither asked nor taken up again
    assert session.held is None and session.answer.text == stopped_at and session.phase == "listening"
    assert session.conversation(3) == (Turn("What do you count?", stopped_at),)  # the next question follows it


def test_stop_said_over_a_finished_answer_drops_its_held_sound(tmp_path):
    models, session, sent, _ = spoken_over(tmp_path, "Never mind.")
    engine, told = make_engine(), len(sent)
    updates = list(answer(engine, models, session, SETTINGS))
    assert updates[0]["transcript"] == "Never mind." and kinds(sent[told:]) == ["hush"]
    assert engine.lm.prefills == [] and session.held is None and session.playing_until == 0.0


def test_an_acknowledgement_over_the_answer_lets_it_play_on_without_a_warning(tmp_path):
    models, session, sent, _ = spoken_over(tmp_path, "Oh, okay.")
    engine, told = make_engine(), len(sent)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        updates = list(answer(engine, models, session, SETTINGS))
    assert updates == [{"status": status_html("speaking")}]
    assert kinds(sent[told:]) == ["resume"] and engine.lm.prefills == [] and session.held is None


def test_with_nothing_playing_stop_asks_nothing_and_an_acknowledgement_says_so(tmp_path):
    models, engine = make_models(tmp_path, FakeTranscriber("Stop.")), make_engine()
    session = asked(models)
    on_line(session)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: there was nothing to stop
        assert list(answer(engine, models, session, SETTINGS))[0]["transcript"] == "Stop."
    warned = warnings_of(engine, make_models(tmp_path, FakeTranscriber("Thanks.")))
    assert any("Heard only “Thanks.”" in w for w in warned) and engine.lm.prefills == []


def test_a_question_with_stop_in_it_and_stop_with_the_phrases_turned_off_are_questions(tmp_path):
    unset = replace(SETTINGS, voice_stop_phrases=())
    for heard, settings in (("What does the stop sign say?", SETTINGS), ("Stop.", unset)):
        models, session, sent, _ = spoken_over(tmp_path, heard)
        engine, told = make_engine(b"It is red."), len(sent)
        updates = list(answer(engine, models, session, settings)) + list(speak(session, settings))
        assert updates[0]["transcript"] == heard and updates[0]["answer"] == ""
        assert kinds(sent[told:])[:2] == ["hush", "sound"] and len(engine.lm.prefills) == 1, heard


class StopThenAsked:
    """Hears "Stop."; while it does, the person asks a question (`during`), which it hears as "Where is it?"."""

    def __init__(self):
        self.during = None

    def transcribe(self, audio):
        during, self.during = self.during, None
        if during is None:
            return Transcript("Where is it?", "en", audio.size / RATE, elapsed_s=0.01)
        during()
        return Transcript("Stop.", "en", audio.size / RATE, elapsed_s=0.01)


def test_a_stop_heard_after_a_newer_question_came_leaves_that_question_and_its_page_alone(tmp_path):
    transcriber = StopThenAsked()
    models, engine = make_models(tmp_path, transcriber), make_engine(b"Here.")
    session = asked(models)
    link, sent = on_line(session)
    transcriber.during = lambda: speak_over(link, 1.0)
    assert list(answer(engine, models, session, SETTINGS)) == []  # no "Stop." shown, the status left to the next
    assert "hush" not in [m["type"] for m in sent[sent.index({"type": "ask"}):]]  # nothing dropped for the stop
    updates = list(answer(engine, models, session, SETTINGS))
    assert updates[0]["transcript"] == "Where is it?" and [u["answer"] for u in updates if "answer" in u][-1] == "Here."
