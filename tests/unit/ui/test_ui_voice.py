"""The voice pipeline with fakes: hear -> transcribe -> answer -> speak each sentence, barge-in, muting, no sound."""

import logging
import threading
import time

import numpy as np
import pytest

from fastvlm import EngineConfig
from fastvlm.engine.engine import Engine
from fastvlm.speech import SpeechConfig, SpeechStarted, SpeechUnavailable, Transcript, TurnEnded
from fastvlm.speech.audio import write_wav
from fastvlm.speech.tts import Speech
from tests.fakes import FakeLM, FakeVision
from ui.settings import AppSettings
from ui.voice.listening import BargeIn, listen, record
from ui.voice.models import SpeechModels
from ui.voice.session import VoiceSession
from ui.voice.speech_queue import SpeechQueue
from ui.voice.events import Answering, Heard, NotHeard, Said, Silent
from ui.voice.playing import speak_rest
from ui.voice.turn import answer_turn

RATE = 16_000
FRAME = np.random.default_rng(0).integers(30, 255, (48, 64, 3), dtype=np.uint8)
SETTINGS = AppSettings(ui_update_s=0, voice_update_s=0, voice_max_new_tokens=1000, voice_sentence_gap_s=0,
                       voice_echo_margin_s=0.5, voice_keep_audio=2)


class FakeTranscriber:
    def __init__(self, text="What am I holding?", error=None):
        self.text, self.error, self.calls = text, error, 0

    def transcribe(self, audio):
        self.calls += 1
        if self.error:
            raise self.error
        return Transcript(self.text, "en", audio.size / RATE, no_speech=not self.text, elapsed_s=0.01)


class FakeSpeaker:
    """Writes 0.05 s of silence per sentence into its own file; `fail` makes every call fail."""

    engine = "fake-tts"

    def __init__(self, folder, fail=None):
        self.folder, self.fail, self.texts, self.at = folder, fail, [], []
        self.lock = threading.Lock()

    def synthesize(self, text):
        with self.lock:
            self.texts.append(text)
            self.at.append(time.monotonic())
            if self.fail:
                raise SpeechUnavailable(self.fail)
            path = self.folder / f"s{len(self.texts)}.wav"
        write_wav(path, RATE, np.zeros(800, np.int16))
        return Speech(path, self.engine, "v1")


class LoudnessVad:
    def initial_state(self):
        return 0

    def __call__(self, windows, state):
        return (np.abs(windows).max(axis=1) > 0.1).astype(np.float32), state


def voice(seconds):
    return (0.5 * np.sin(np.arange(int(RATE * seconds)) * 0.3)).astype(np.float32)


def make_engine(script=b"You hold a red cup. It looks full. That is all.", delay=0.0):
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    return Engine(FakeVision(), FakeLM(script, delay=delay), config)


def make_models(tmp_path, transcriber=None, fail=None):
    return SpeechModels(transcriber or FakeTranscriber(), FakeSpeaker(tmp_path, fail), LoudnessVad(), SpeechConfig())


def asked(models, frame=FRAME):
    session = VoiceSession(frame=frame)
    session.listen(models.turn_taker())
    session.ask(voice(1.0), time.monotonic())
    return session


def test_a_question_is_answered_and_its_first_sentence_spoken_before_the_stream_ends(tmp_path):
    engine, models = make_engine(delay=0.01), make_models(tmp_path)
    requests = []
    stream = engine.stream
    engine.stream = lambda request, wait=None, cancel=None: requests.append(request) or stream(request, wait, cancel)
    session = asked(models)
    events = list(answer_turn(engine, models, session, SETTINGS))
    assert isinstance(events[0], Heard) and events[0].transcript.text == "What am I holding?"
    assert requests[0].question == "What am I holding?" and requests[0].image is FRAME
    said = [i for i, e in enumerate(events) if isinstance(e, Said)]
    end = next(i for i, e in enumerate(events) if isinstance(e, Answering) and e.part.stats is not None)
    assert said and said[0] < end, "the first sentence was not played before the answer finished"
    assert events[end].part.text == "You hold a red cup. It looks full. That is all."
    assert events[said[0]].first_sound_s is not None and events[said[0]].speech.engine == "fake-tts"
    rest = list(speak_rest(session, SETTINGS))  # what was left when the engine was already free
    spoken = [e.speech.path for e in events + rest if isinstance(e, Said)]
    assert models.speaker.texts == ["You hold a red cup.", "It looks full.", "That is all."]
    assert len(spoken) == 3 and spoken[0] != spoken[1]  # a new file per sentence
    assert [p.exists() for p in spoken] == [False, True, True]  # only the newest `voice_keep_audio` are kept
    session.close()
    assert not any(p.exists() for p in spoken)


def test_the_first_sound_logs_where_the_turn_spent_its_time(tmp_path, caplog):
    engine, models = make_engine(), make_models(tmp_path)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker())
    session.ask(voice(1.0), time.monotonic() - 0.4)  # the question became known 0.4 s after its speech ended
    with caplog.at_level(logging.DEBUG, logger="ui.voice.session"):
        list(answer_turn(engine, models, session, SETTINGS))
        list(speak_rest(session, SETTINGS))  # a slow voice (a loaded machine) says the first sentence only here
    times = session.times
    assert times.asked_s == pytest.approx(0.4, abs=0.05) and times.asked_s <= times.begun_s <= times.first_sound_s
    lines = [r.getMessage() for r in caplog.records if "first sound sent" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"voice turn {session.turn}: question known 0.4"), lines
    assert "?" not in lines[0], lines  # every stage was timed
    session.close()


def test_the_voice_starts_with_the_first_phrase_unless_whole_sentences_are_set(tmp_path):
    from dataclasses import replace

    for words, first in ((3, "You are holding"), (0, "You are holding a red mug.")):
        engine, models = make_engine(b"You are holding a red mug. It looks full."), make_models(tmp_path)
        session = asked(models)
        settings = replace(SETTINGS, voice_first_phrase_words=words)
        list(answer_turn(engine, models, session, settings)) + list(speak_rest(session, settings))
        assert models.speaker.texts[0] == first and models.speaker.texts[-1] == "It looks full."
        session.close()


def test_no_speech_or_a_broken_recording_never_reaches_the_model(tmp_path):
    from fastvlm.engine.events import InputError

    engine = make_engine()
    for transcriber in (FakeTranscriber(""), FakeTranscriber(error=InputError("the recording is empty")),
                        FakeTranscriber(error=RuntimeError("ctranslate2 exploded"))):
        models = make_models(tmp_path, transcriber)
        events = list(answer_turn(engine, models, asked(models), SETTINGS))
        assert len(events) == 1 and isinstance(events[0], NotHeard)
    models = make_models(tmp_path, FakeTranscriber(""))
    assert "No speech heard" in next(answer_turn(engine, models, asked(models), SETTINGS)).message
    assert engine.vision.calls == 0 and engine.lm.prefills == []


def test_no_camera_frame_shows_the_transcript_but_asks_nothing(tmp_path):
    engine, models = make_engine(), make_models(tmp_path)
    events = list(answer_turn(engine, models, asked(models, frame=None), SETTINGS))
    assert [type(e) for e in events] == [Heard, NotHeard] and "camera" in events[1].message
    assert engine.lm.prefills == []


def test_a_new_question_stops_the_answer_that_is_still_streaming(tmp_path):
    engine, models = make_engine(b"x" * 400, delay=0.005), make_models(tmp_path)
    session = asked(models)
    turn = answer_turn(engine, models, session, SETTINGS)
    assert isinstance(next(turn), Heard)
    assert isinstance(next(turn), Answering) and engine.busy
    events = []
    for i in range(0, RATE, 1600):  # the person talks over the answer, in 0.1 s microphone chunks
        events += listen(session, RATE, voice(1.0)[i:i + 1600], SETTINGS.voice_echo_margin_s)
    assert any(isinstance(e, SpeechStarted) for e in events)
    list(turn)  # stops at its next token
    assert engine.lm.evaluated < 200 and not engine.busy and not engine.lm.generating.is_set()
    assert session.speech.done  # and says nothing more


def test_the_microphone_is_deaf_while_the_answer_plays(tmp_path):
    now = [100.0]
    models = make_models(tmp_path)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker())
    speech = models.speaker.synthesize("Hello there.")
    session.play(speech, duration_s=2.0, now=now[0], gap_s=0, keep=4)  # plays until 102.0

    def talk(seconds):
        events = []
        for _ in range(0, int(seconds * RATE), 4000):  # 0.25 s chunks, the clock moving with them
            now[0] += 0.25
            events += listen(session, RATE, voice(0.25), SETTINGS.voice_echo_margin_s, clock=lambda: now[0],
                             settle_s=1.0)
        return events

    assert talk(2.0) == [] and session.taker.detector.muted  # its own voice through the speakers: not a question
    assert talk(0.5) == []  # the echo margin
    now[0] += 0.1
    events = talk(1.0) + listen(session, RATE, np.zeros(RATE, np.float32), 0.5, clock=lambda: now[0], settle_s=1.0)
    assert [type(e) for e in events] == [SpeechStarted, TurnEnded]
    assert session.questions == 1 and session.utterance.frame is FRAME


def test_when_neither_voice_works_the_answer_is_shown_and_says_why_there_is_no_sound(tmp_path):
    engine = make_engine()
    models = make_models(tmp_path, fail="No sound: edge-tts failed (no connection); offline voice failed too")
    session = asked(models)
    events = list(answer_turn(engine, models, session, SETTINGS)) + list(speak_rest(session, SETTINGS))
    assert events[-1] is not None and not any(isinstance(e, Said) for e in events)
    silent = [e for e in events if isinstance(e, Silent)]
    assert silent and "edge-tts failed" in silent[0].reason
    final = [e for e in events if isinstance(e, Answering)][-1]
    assert final.part.text == "You hold a red cup. It looks full. That is all." and final.part.stats is not None


def test_push_to_talk_takes_any_microphone_format_and_refuses_broken_audio(tmp_path):
    from fastvlm.engine.events import InputError

    session = VoiceSession(frame=FRAME)
    record(session, 44_100, (np.sin(np.arange(44_100) * 0.05) * 8000).astype(np.int16).repeat(2).reshape(-1, 2))
    assert session.utterance.audio.shape == (RATE,) and session.questions == 1
    with pytest.raises(InputError, match="empty"):
        record(session, 48_000, np.zeros(0, np.int16))
    with pytest.raises(InputError, match="NaN"):
        record(session, 48_000, np.array([0.1, np.nan], np.float32))


def test_a_closed_queue_deletes_sentences_made_but_never_played(tmp_path):
    speaker = FakeSpeaker(tmp_path)
    queue = SpeechQueue(speaker)
    queue.say("One.")
    queue.say("...")  # nothing to say: skipped
    queue.finish()
    time.sleep(0.2)
    queue.close()
    assert speaker.texts == ["One."] and list(tmp_path.iterdir()) == [] and queue.done


def talk(session, audio):
    events = []
    for i in range(0, audio.size, 1600):  # 0.1 s microphone chunks, each verdict waited for
        events += listen(session, RATE, audio[i:i + 1600], SETTINGS.voice_echo_margin_s, settle_s=1.0)
    return events


def test_the_semantic_end_of_turn_answers_from_the_transcript_made_at_the_first_short_pause(tmp_path):
    transcriber = FakeTranscriber()  # "What am I holding?": finished
    models = make_models(tmp_path, transcriber)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker())
    events = talk(session, np.concatenate([voice(1.0), np.zeros(int(0.4 * RATE), np.float32)]))
    assert [type(e) for e in events] == [SpeechStarted, TurnEnded] and events[1].by == "judge"
    assert session.utterance is not None and session.utterance.early is not None
    assert isinstance(next(answer_turn(make_engine(), models, session, SETTINGS)), Heard)
    assert transcriber.calls == 1  # the transcript made at the pause was used, not redone


def test_the_silence_rule_transcribes_from_each_pause_and_answers_from_the_one_that_ended_the_question(tmp_path):
    transcriber = FakeTranscriber()
    models = make_models(tmp_path, transcriber)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(300, rule="silence"))
    quiet = np.zeros(int(0.45 * RATE), np.float32)
    talk(session, np.concatenate([voice(1.0), quiet]))
    assert session.utterance is None  # a pause: transcribing, not yet an end
    talk(session, np.zeros(int(0.6 * RATE), np.float32))  # the pause was the end
    assert session.utterance.early is not None
    assert isinstance(next(answer_turn(make_engine(), models, session, SETTINGS)), Heard)
    assert transcriber.calls == 1

    session.listen(models.turn_taker(300, rule="silence"))
    talk(session, np.concatenate([voice(1.0), quiet, voice(0.6), quiet, quiet]))  # a pause mid-question
    assert session.utterance is not None and session.utterance.early is not None
    next(answer_turn(make_engine(), models, session, SETTINGS))
    assert transcriber.calls == 3  # one per pause; the answer used the second, made from the whole question


def test_a_question_spoken_past_max_audio_is_answered_from_its_first_part_and_says_so(tmp_path):
    transcriber = FakeTranscriber("What is on the table and what")  # unfinished at every pause
    models = SpeechModels(transcriber, FakeSpeaker(tmp_path), LoudnessVad(), SpeechConfig(max_audio_s=2.0))
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(likely_events=True))
    events = talk(session, np.concatenate([voice(3.5), np.zeros(3 * RATE, np.float32)]))
    assert [type(e) for e in events] == [SpeechStarted, TurnEnded] and events[1].by == "max_audio"
    assert session.questions == 1 and session.utterance.cut  # its tail neither stopped it nor was asked
    heard = next(answer_turn(make_engine(), models, session, SETTINGS))
    assert isinstance(heard, Heard) and heard.notice.startswith("Only the first 2 s of the question were heard")


def test_with_barge_in_speech_over_the_playing_answer_stops_it_and_is_the_next_question(tmp_path):
    engine, models = make_engine(b"x" * 400, delay=0.005), make_models(tmp_path)
    session = asked(models)
    turn = answer_turn(engine, models, session, SETTINGS)
    assert isinstance(next(turn), Heard) and isinstance(next(turn), Answering)
    session.playing_until = time.monotonic() + 10  # a sentence is playing
    events = []
    for i in range(0, int(1.5 * RATE), 1600):  # the person talks over it, then stops
        chunk = np.concatenate([voice(1.0), np.zeros(RATE // 2, np.float32)])[i:i + 1600]
        events += listen(session, RATE, chunk, SETTINGS.voice_echo_margin_s, settle_s=1.0, barge_in=BargeIn())
    assert [type(e) for e in events] == [SpeechStarted, TurnEnded]
    assert session.barge_ins == 1 and session.playing_until == 0.0 and session.questions == 2
    list(turn)  # the answer stops at its next token
    assert not engine.busy and (session.speech is None or session.speech.done)


def test_the_line_resamples_its_frames_as_one_stream(tmp_path):
    session = VoiceSession(frame=FRAME)
    session.listen(make_models(tmp_path).turn_taker())
    pcm = (np.repeat(voice(0.5), 3) * 32767).astype(np.int16)  # 0.5 s at 48 kHz, in 10-sample frames
    for k in range(0, pcm.size, 10):
        listen(session, 48_000, pcm[k:k + 10], SETTINGS.voice_echo_margin_s)
    assert session.heard_s == pytest.approx(0.5, abs=1 / RATE)


def test_without_barge_in_the_playing_answer_is_not_interrupted(tmp_path):
    models = make_models(tmp_path)
    session = asked(models)
    session.playing_until = time.monotonic() + 10
    events = [e for i in range(0, RATE, 1600)
              for e in listen(session, RATE, voice(1.0)[i:i + 1600], 0.5, barge_in=None)]
    assert events == [] and session.barge_ins == 0 and session.taker.detector.muted
