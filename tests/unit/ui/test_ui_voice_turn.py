"""One spoken turn's details that the mutation probe found untested in `ui/voice/turn.py` (since
split into turn.py, playing.py and events.py; docs/testing.md)."""

import threading

import numpy as np

from fastvlm.engine.events import TextDelta
from fastvlm.speech import Transcript
from fastvlm.speech.audio import RATE, write_wav
from tests.unit.ui.test_ui_voice import SETTINGS, FakeTranscriber, asked, make_engine, make_models
from tests.unit.ui.test_ui_voice_session import Line, spoken
from ui.voice.session import Utterance, VoiceSession
from ui.voice.events import NotHeard
from ui.voice.playing import EDGE_MP3_BITS_PER_S, LinePush, audio_duration, speak_rest
from ui.voice.turn import NO_SPEECH, _said_aloud, _transcribe, answer_turn


def test_a_spoken_files_length_is_a_wavs_frames_or_an_edge_mp3s_size_at_its_bit_rate(tmp_path):
    wav = tmp_path / "s.WAV"
    write_wav(wav, 24_000, np.zeros(36_000, np.int16))
    assert audio_duration(wav) == 1.5
    mp3 = tmp_path / "s.mp3"
    mp3.write_bytes(b"\xff" * (EDGE_MP3_BITS_PER_S // 8 * 2))  # two seconds at 48 kbit/s
    assert audio_duration(mp3) == 2.0 and EDGE_MP3_BITS_PER_S == 48_000


class Says:
    def __init__(self, transcript):
        self.transcript = transcript

    def transcribe(self, audio):
        return self.transcript


def test_a_transcript_with_no_words_or_flagged_as_no_speech_never_becomes_a_question():
    u = Utterance(np.zeros(RATE, np.float32), None, ended_at=0.0)
    for transcript in (Transcript("  ", "en", 1.0), Transcript("Thank you.", "en", 1.0, no_speech=True)):
        heard = _transcribe(Says(transcript), u)
        assert isinstance(heard, NotHeard) and heard.message == NO_SPEECH, transcript
    assert _transcribe(Says(Transcript("Why?", "en", 1.0)), u).text == "Why?"


def test_a_question_that_was_not_heard_is_no_longer_awaited(tmp_path):
    models = make_models(tmp_path, FakeTranscriber(""))
    session = asked(models)
    assert isinstance(list(answer_turn(make_engine(), models, session, SETTINGS))[-1], NotHeard)
    assert session.transcribing is None and not session.awaiting  # speech now may stop or start what it likes


class Answer:
    def __init__(self):
        self.texts, self.settled = [], threading.Event()

    def heard(self, text):
        self.texts.append(text)

    def ended(self):
        pass


def test_closing_the_spoken_stream_closes_the_engines_stream():
    closed = threading.Event()

    def engine_stream():
        try:
            yield TextDelta("It is ")
            yield TextDelta("a cup.")
        finally:
            closed.set()

    answer, stream = Answer(), engine_stream()  # held here: not closed by the garbage collector
    spoken = _said_aloud(stream, answer)
    next(spoken)
    spoken.close()  # a new question over the answer: decoding must stop, the engine be free
    assert closed.is_set() and answer.settled.is_set() and answer.texts == ["It is "]


class ReadyQueue:
    def __init__(self, *items, done=False):
        self.lock, self.items, self.done = threading.Lock(), list(items), done

    def wait(self, timeout):
        pass

    def take(self):
        return self.items.pop(0) if self.items else None


def test_the_line_sends_nothing_once_it_is_closed(tmp_path):
    queue = ReadyQueue(spoken(tmp_path))
    session = VoiceSession(turn=1)  # the line closed: `link` is None
    push = LinePush(session, queue, 1, SETTINGS, clock=lambda: 0.0)
    push()
    assert queue.items and not push.told  # left for Gradio's player, which takes it when the page asks


def test_over_an_open_line_every_sentence_ready_is_sent_at_once(tmp_path):
    queue = ReadyQueue(*(spoken(tmp_path, f"{i}.wav") for i in range(3)))
    session = VoiceSession(turn=1, link=Line())
    push = LinePush(session, queue, 1, SETTINGS, clock=lambda: 0.0)
    push()
    assert not queue.items and len(push.told) == 3 and [t for _, t in session.link.said] == [1, 1, 1]


def test_the_rest_of_an_answer_waits_in_short_sleeps_for_a_held_question_or_the_sound_playing():
    for held_end_s, playing_until, slept_expected in ((5.0, 0.0, 0.02), (None, 10.05, 0.05), (None, 11.0, 0.1)):
        session = VoiceSession(turn=1, speech=ReadyQueue(), held_end_s=held_end_s, playing_until=playing_until)
        slept = []

        def sleep(s, session=session, slept=slept):
            slept.append(round(s, 6))
            session.turn += 1  # a new question: the loop ends

        assert list(speak_rest(session, SETTINGS, clock=lambda: 10.0, sleep=sleep)) == []
        assert slept == [slept_expected]
