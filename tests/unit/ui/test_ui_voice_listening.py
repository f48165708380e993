"""`listen()` on a scripted turn taker: which chunks are fed, when the microphone is deaf, what each turn event does
to the session (the question's frame and end time, confirming an answer asked early), and when speech over a
playing answer holds its sound or lets it play on. The taker's events are told, not heard, so each rule is seen
at its boundary (tests/unit/ui/test_ui_voice.py drives the same code with a real detector)."""

from types import SimpleNamespace

import numpy as np
import pytest

from fastvlm.speech import SpeechOnset, SpeechStarted, TurnEnded, UtteranceEnded
from fastvlm.speech.turn import TurnLikelyEnded
from ui.settings import AppSettings
from ui.voice.listening import BargeIn, listen
from ui.voice.session import VoiceSession

RATE = 16_000
MARGIN_S = 0.5
FRAME_A, FRAME_B = np.zeros((4, 4, 3), np.uint8), np.ones((4, 4, 3), np.uint8)


class Detector:
    """What `listen` reads of the turn taker's detector: set by each test."""

    def __init__(self):
        self.muted, self.strict_ms, self.fed_s = False, None, 0.0
        self.onsets, self.onset_s, self.onset_strict = True, 0.0, False
        self.config = SimpleNamespace(min_speech_ms=250)

    def mute(self):
        self.muted = True

    def unmute(self):
        self.muted = False


class ScriptedTaker:
    """Gives the events in `next` for the next chunk fed; its detector counts the audio; records how long it was
    let wait for a verdict."""

    def __init__(self):
        self.detector, self.next, self.fed, self.settled, self.over_answer = Detector(), [], [], [], False

    def feed(self, rate, chunk):
        self.fed.append(chunk.size)
        self.detector.fed_s += chunk.size / rate
        events, self.next = self.next, []
        return events

    def settle(self, timeout_s):
        self.settled.append(timeout_s)
        return []


class Line:
    """The page's line, recording what it was told."""

    def __init__(self):
        self.told = []

    def say(self, path, turn):
        return True

    def hush(self, turn):
        self.told.append("hush")

    def hold(self, held):
        self.told.append("hold" if held else "play on")

    def close(self):
        pass


def listening(frame=FRAME_A) -> tuple[VoiceSession, ScriptedTaker]:
    session, taker = VoiceSession(frame=frame), ScriptedTaker()
    session.listen(taker)
    return session, taker


def chunk(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), np.float32)


def hear(session, seconds=0.125, events=(), now=100.0, barge_in=None):
    session.taker.next = list(events)
    return listen(session, RATE, chunk(seconds), MARGIN_S, clock=lambda: now, barge_in=barge_in)


def test_nothing_is_fed_when_not_listening_or_the_chunk_is_empty():
    session, taker = listening()
    session.listening = False
    assert hear(session, events=[SpeechStarted(0.0)]) == [] and taker.fed == []
    session.listening = True
    assert listen(session, RATE, chunk(0), MARGIN_S) == [] and taker.fed == [] and session.chunks == 0
    listen(session, RATE, chunk(1 / RATE), MARGIN_S)  # one sample is audio
    assert taker.fed == [1] and session.chunks == 1 and session.heard_s == 1 / RATE


def test_the_microphone_is_deaf_until_the_echo_margin_after_the_answer_has_played():
    session, taker = listening()
    session.playing_until = 100.0
    hear(session, now=100.0 + MARGIN_S - 0.125)
    assert taker.detector.muted
    hear(session, now=100.0 + MARGIN_S)  # the margin is over: hearing again
    assert not taker.detector.muted


@pytest.mark.parametrize("event", [UtteranceEnded(chunk(0.5), 0.25, 0.75),
                                   TurnLikelyEnded(chunk(0.5), 0.25, 0.75, None, None)])
def test_a_question_ends_when_its_speech_ended_not_when_the_end_was_known(event):
    session, _ = listening()
    hear(session, 0.5)
    hear(session, 0.5, [event], now=100.0)  # 1 s heard by now; the speech ended at 0.75 s, 0.25 s ago
    assert session.questions == 1 and session.utterance.ended_at == 100.0 - 0.25


def test_the_question_is_about_the_frame_of_its_first_sound():
    session, _ = listening(FRAME_A)
    hear(session, events=[SpeechOnset(0.0)])
    session.frame = FRAME_B  # the camera moved on while the speech was confirmed
    hear(session, events=[SpeechStarted(0.0)])
    assert session.question_frame is FRAME_A


def test_without_onsets_the_question_is_about_the_frame_when_speech_started():
    session, taker = listening(FRAME_B)
    taker.detector.onsets, session.question_frame = False, FRAME_A  # a frame left over from before
    hear(session, events=[SpeechStarted(0.0)])
    assert session.question_frame is FRAME_B


def test_a_cough_while_a_question_waits_lets_its_answer_come_and_waits_no_more():
    session, taker = listening()
    session.utterance = object()  # asked, its answer not begun
    hear(session, events=[SpeechStarted(0.0)])
    assert session.over_waiting and taker.over_answer
    hear(session, events=[TurnEnded(chunk(0.2), 0.0, 0.2, by="no_words")])
    assert not session.over_waiting and session.questions == 0


def test_an_answer_asked_at_the_verdict_sounds_once_the_end_is_confirmed():
    session, _ = listening()
    pushed = []
    session.push = lambda: pushed.append(session.turn)
    hear(session, 0.5, [TurnLikelyEnded(chunk(0.5), 0.0, 0.5, None, None)])
    assert session.held_end_s == 0.5 and session.questions == 1 and pushed == []
    hear(session, 0.5, [UtteranceEnded(chunk(0.5), 0.0, 0.5)])
    assert pushed == [session.turn] and session.held_end_s is None and session.questions == 1
    session.push = None  # a confirm with no line to push over asks nothing either
    hear(session, 0.5, [TurnLikelyEnded(chunk(0.5), 0.0, 1.5, None, None)])
    hear(session, 0.5, [UtteranceEnded(chunk(0.5), 0.0, 1.5)])
    assert session.questions == 2


def over_playing_answer(onset_strict=False) -> tuple[VoiceSession, Line, BargeIn]:
    session, taker = listening()
    session.link, session.playing_until = Line(), 200.0
    taker.detector.onset_strict = onset_strict
    return session, session.link, BargeIn(hold_s=0.125, resume_s=0.25)


def test_speech_over_the_answer_holds_its_sound_once_it_lasts_hold_s():
    session, line, barge_in = over_playing_answer()
    session.taker.detector.onset_s = 0.124
    hear(session, barge_in=barge_in)
    assert line.told == [] and session.held is None
    session.taker.detector.onset_s = 0.125
    hear(session, barge_in=barge_in)
    assert line.told == ["hold"] and session.held.at == 100.0


def test_in_the_echo_window_speech_must_last_as_long_as_a_question_to_hold_the_sound():
    session, line, barge_in = over_playing_answer(onset_strict=True)
    session.taker.detector.onset_s = 0.2499  # min_speech_ms is 250
    hear(session, barge_in=barge_in)
    assert line.told == []
    session.taker.detector.onset_s = 0.25
    hear(session, barge_in=barge_in)
    assert line.told == ["hold"]


def test_held_speech_that_stops_short_of_a_question_plays_on_after_resume_s_of_quiet():
    session, line, barge_in = over_playing_answer()
    d = session.taker.detector
    d.onset_s = 0.5
    hear(session, barge_in=barge_in)
    hear(session, barge_in=barge_in)  # still speaking
    assert session.held.quiet_from is None
    d.onset_s = 0.0  # quiet from here
    hear(session, barge_in=barge_in)
    assert session.held.quiet_from == session.heard_s == 0.375
    hear(session, barge_in=barge_in)  # 0.125 s of quiet
    assert line.told == ["hold"]
    hear(session, barge_in=barge_in)  # 0.25 s
    assert line.told == ["hold", "play on"] and session.held is None


def test_speech_again_before_resume_s_keeps_the_sound_held():
    session, line, barge_in = over_playing_answer()
    d = session.taker.detector
    d.onset_s = 0.5
    hear(session, barge_in=barge_in)
    d.onset_s = 0.0
    hear(session, barge_in=barge_in)
    d.onset_s = 0.5  # speaking again
    hear(session, barge_in=barge_in)
    assert session.held.quiet_from is None and line.told == ["hold"]


def test_barge_in_reads_its_settings_in_seconds():
    settings = AppSettings(voice_barge_in_ms=300, voice_echo_settle_s=0.5, voice_echo_speech_ms=450,
                           voice_resume_s=0.3)
    assert BargeIn.of(settings) == BargeIn(hold_s=0.3, echo_settle_s=0.5, echo_speech_ms=450, resume_s=0.3)
