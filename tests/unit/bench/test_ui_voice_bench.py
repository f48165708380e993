"""`fastvlm.bench.voice` with fakes and no real-time waits: every stage is measured and the report adds up."""

import argparse
import json
import time

import numpy as np
import pytest

from fastvlm.bench import turns, voice
from fastvlm.cli.main import add_model_arguments
from tests.fakes import record_questions
from tests.unit.ui.test_ui_voice import RATE, FakeSpeaker, FakeTranscriber, LoudnessVad, make_engine


class SimulatedTime:
    """perf_counter = real time + every sleep so far; sleep returns at once."""

    def __init__(self):
        self.slept = 0.0

    def perf_counter(self):
        return time.perf_counter() + self.slept

    monotonic = perf_counter

    def sleep(self, seconds):
        self.slept += max(0.0, seconds)


def _questions(*end_s: float) -> list[tuple]:
    """A 2 s tone from 0.5 s to 2.5 s, 1.5 s of silence after; each told to end at one of `end_s`."""
    lead, spoken = np.zeros(RATE // 2, np.float32), (0.5 * np.sin(np.arange(2 * RATE) * 0.3)).astype(np.float32)
    audio = np.concatenate([lead, spoken, np.zeros(3 * RATE // 2, np.float32)])
    return [(audio, end, "What am I holding?", 0.5) for end in end_s]


def _bench(tmp_path, monkeypatch, transcriber, questions, *flags: str) -> tuple[dict, list]:
    """bench-voice at 128 px with fakes and simulated time -> (its report, the questions the engine was asked)."""
    monkeypatch.setattr(voice, "_speech", lambda config, tts, wpm, source: (transcriber, FakeSpeaker(tmp_path),
                                                                            LoudnessVad(), questions))
    clock = SimulatedTime()
    monkeypatch.setattr(voice, "time", clock)  # the microphone's waits pass at once
    monkeypatch.setattr(turns, "time", clock)
    monkeypatch.setattr(voice.os, "getloadavg", lambda: (0.5, 0.5, 0.5))
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    voice.add_arguments(parser)
    args = parser.parse_args(["--resolutions", "128", "--threads", "1", "--report-json", str(tmp_path / "voice.json"),
                              *flags])
    engine = make_engine(b"You hold a red cup. It looks full.")
    asked = record_questions(engine)
    assert voice.run(args, lambda a: engine) == 0
    return json.loads((tmp_path / "voice.json").read_text()), asked


@pytest.mark.parametrize("rule, tail", [("semantic", (0.6, 0.95)), ("silence", (0.7, 1.1))])
def test_each_turn_is_timed_stage_by_stage_and_the_early_transcript_is_used(tmp_path, monkeypatch, capsys, rule,
                                                                            tail):
    transcriber = FakeTranscriber()
    report, asked = _bench(tmp_path, monkeypatch, transcriber, _questions(2.5), "--num-runs", "2", "--warmup-runs",
                           "1", "--end-of-turn", rule)
    runs = report["by_resolution"]["128"]["runs"]
    assert report["questions_s"] == [2.0]  # spoken from 0.5 s to 2.5 s
    assert len(runs) == 2 and all(r["early_stt_used"] for r in runs)
    assert transcriber.calls == 3  # one early transcript per turn, none redone
    for r in runs:
        # semantic: turn_min_silence_ms, a VAD window, up to a chunk (0.25 s); silence: end_silence_ms and a chunk
        assert tail[0] <= r["vad_tail_s"] <= tail[1] and r["ended_by"] == {"semantic": "judge"}.get(rule, rule)
        assert all(r[k] >= 0 for k in voice.STAGES) and r["voice"] == "fake-tts"
        # the transcript was ready at the end; the prepare's thread counts the question's simulated seconds too
        assert r["stt_s"] < 0.05 and 0 <= r["prepare_s"] < 5
        # semantic: answered from the 120 ms pause on (--preemptive), heard once the turn is over
        assert r["preemptive"] is (rule == "semantic") and r["preemptive_cancelled"] == 0
        assert r["total_s"] >= r["vad_tail_s"] + (0 if r["preemptive"] else r["ttft_s"])
        assert r["total_s"] <= r["vad_tail_s"] + 0.5  # the fakes answer in milliseconds once the turn is over
        assert 0 < r["sentence_s"] < 0.5 and r["tts_s"] < 0.5 and r["transcript"] == transcriber.text
    assert set(asked) == {transcriber.text}  # what was heard is what is asked
    out = capsys.readouterr().out
    assert "128 px: VAD tail" in out and "early transcript used 2/2" in out and "load 0.50" in out


def test_a_question_cut_off_before_its_end_is_counted_and_left_out_of_the_times(tmp_path, monkeypatch, capsys):
    """People pause mid-question (`--questions people`): a turn that ends 0.3 s or more before the question's last
    sound answered part of it, and its 'time to the answer' (negative) would pull the median down."""
    report, _ = _bench(tmp_path, monkeypatch, FakeTranscriber(), _questions(3.2, 2.5), "--num-runs", "2",
                       "--warmup-runs", "0")
    size = report["by_resolution"]["128"]
    assert [r["cut"] for r in size["runs"]] == [True, False] and size["cut"] == 1
    assert size["summary"]["total_s"]["n"] == 1 and size["summary"]["total_s"]["median"] == size["runs"][1]["total_s"]
    assert "cut off 1 (untimed)" in capsys.readouterr().out
    report, _ = _bench(tmp_path, monkeypatch, FakeTranscriber(), _questions(2.7), "--num-runs", "1",
                       "--warmup-runs", "0")
    assert report["by_resolution"]["128"]["cut"] == 0  # 0.2 s before its end: Silero's lag, not a cut


def test_the_bench_waits_for_a_quiet_machine_but_not_past_its_limit(monkeypatch, caplog):
    clock = SimulatedTime()
    monkeypatch.setattr(voice, "time", clock)
    loads = iter([2.0, 1.6, 0.4])
    monkeypatch.setattr(voice.os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    assert voice._wait_quiet(1.5, 300) == 0.4 and clock.slept == 10  # checked every 5 s until below 1.5
    monkeypatch.setattr(voice.os, "getloadavg", lambda: (0.4, 0.0, 0.0))
    clock.slept = 0.0
    assert voice._wait_quiet(1.5, 300) == 0.4 and clock.slept == 0  # quiet already: no wait
    monkeypatch.setattr(voice.os, "getloadavg", lambda: (1.5, 0.0, 0.0))
    with caplog.at_level("WARNING"):
        assert voice._wait_quiet(1.5, 12) == 1.5  # never below the limit (at it is not quiet): measured anyway
    assert 12 <= clock.slept <= 17 and "never got quiet" in caplog.text


def test_a_first_piece_cut_at_the_reference_token_is_spoken_as_the_reference_words(tmp_path):
    """Random weights never end a phrase: the piece is cut where the chunker releases the reference answer's, and
    those words are spoken ("w75540 w75540 ..." read out as numbers costs eSpeak NG 10x more than a real piece)."""
    from tests.unit.ui.test_ui_voice import FRAME

    script = b" w75540" * 12
    reference = argparse.Namespace(first_phrase_words=3, sentence_tokens=0, max_tokens=12)
    speaker = FakeSpeaker(tmp_path)
    voice._answer(make_engine(script), speaker, "What am I holding?", FRAME, 128, reference)
    assert speaker.texts == ["You are holding"]
    own = argparse.Namespace(first_phrase_words=3, sentence_tokens=3, max_tokens=12)  # a cut asked for: its own words
    speaker = FakeSpeaker(tmp_path)
    voice._answer(make_engine(script), speaker, "What am I holding?", FRAME, 128, own)
    assert speaker.texts == [" w7"]  # the fake model's first three tokens (one byte each)


def test_a_turn_with_words_heard_ahead_prefills_them_and_reports_them(tmp_path, monkeypatch):
    """bench-voice's turn as the app takes it: the frame is prepared at the first sound, the turn taker is told
    (`want_words`), and each `HeardSoFar` has the engine prefill those words after the frame; the row lists them."""
    from concurrent.futures import Future

    from fastvlm.speech import HeardSoFar, SpeechOnset, Transcript
    from fastvlm.speech.turn import TurnEnded
    from tests.unit.ui.test_ui_voice import FRAME

    class Taker:
        wanted = None

        def want_words(self, start_s):
            self.wanted = start_s

    def hear(taker, audio, chunk_s, on_event=None):  # the question's events, as the turn taker would send them
        on_event(SpeechOnset(0.5))
        deadline = time.monotonic() + 5
        while taker.wanted is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the frame's prepare, in its thread
        on_event(HeardSoFar(0.5, "What am I"))
        while not prefilled() and time.monotonic() < deadline:
            time.sleep(0.01)  # the words' prepare, in its thread
        heard = Future()
        heard.set_result(Transcript("What am I holding?", "en", 2.0, elapsed_s=0.01))
        return TurnEnded(audio, 0.5, 2.5, False, heard, "silence"), 2.6

    def prefilled() -> list:
        return [p for p in engine.lm.prefills if p[-len("\nWhat am I"):] == [ord(c) for c in "\nWhat am I"]]

    monkeypatch.setattr(turns, "hear_turn", hear)
    parser = argparse.ArgumentParser()
    voice.add_arguments(parser)
    args = parser.parse_args(["--tts", "espeak"])
    engine, taker = make_engine(), Taker()
    row = voice._one_turn(engine, FakeTranscriber(), FakeSpeaker(tmp_path), taker, np.zeros(RATE, np.float32), 2.5,
                          FRAME, 128, args)
    assert taker.wanted == 0.5 and row["prepared_before_end"]
    assert [(a["words"], a["ok"], a["done_before_end"]) for a in row["words_ahead"]] == [("What am I", True, True)]
    assert len(prefilled()) == 1 and row["transcript"] == "What am I holding?"


def test_the_reference_answers_first_piece_is_cut_where_the_apps_chunker_releases_it():
    assert voice.first_piece(3) == (5, "You are holding")  # once " a" shows the phrase is over
    assert voice.first_piece_tokens(3) == 5 and voice.first_piece_tokens(0) == 8  # a sentence: " It" ends it


def test_each_spoken_question_knows_where_its_voice_starts_and_ends(monkeypatch):
    """The end of speech every stage is timed from: the last sample over 0.02 of the synthesized question, after
    the 0.5 s lead (a scripted voice: 0.1 s quiet, a 0.2 s tone with faint edges, 0.1 s quiet)."""
    from fastvlm import speech
    from fastvlm.speech import SpeechConfig, espeak
    from tests.unit.bench.test_turns import Voice

    for name in ("WhisperTranscriber", "FallbackSpeaker", "EspeakSpeaker"):
        monkeypatch.setattr(speech, name, type(name, (), {"load": staticmethod(lambda config, name=name: name)}))
    monkeypatch.setattr(speech, "silero_vad", lambda: "vad")
    monkeypatch.setattr(espeak, "find_backend", Voice)
    transcriber, speaker, vad, questions = voice._speech(SpeechConfig(), "espeak", 140)
    assert (transcriber, speaker, vad) == ("WhisperTranscriber", "EspeakSpeaker", "vad")
    assert [q[2] for q in questions] == list(voice.QUESTIONS)
    audio, end_s, _, start_s = questions[0]
    assert start_s == (8_000 + 1_601) / RATE and end_s == (8_000 + 1_600 + 3_199) / RATE
    assert audio.size == 8_000 + 6_400 + 40_000 and np.abs(audio[round(end_s * RATE):]).max() <= 0.02


def test_a_first_sentence_or_a_short_whole_answer_is_what_is_spoken(tmp_path):
    from tests.unit.ui.test_ui_voice import FRAME

    sentences = argparse.Namespace(first_phrase_words=0, sentence_tokens=100, max_tokens=40)
    for script, said in ((b"Red. Blue. Green.", "Red."), (b"Red", "Red")):
        speaker = FakeSpeaker(tmp_path)
        voice._answer(make_engine(script), speaker, "What colors?", FRAME, 128, sentences)
        assert speaker.texts == [said]


def test_an_answer_begun_at_a_pause_the_person_spoke_on_from_is_withdrawn_and_the_whole_question_answered(
        tmp_path, monkeypatch):
    """--preemptive: the answer begun at `TurnLikelyEnded` is cancelled by the `TurnResumed` for its pause and
    never spoken; the turn's end (a later pause) is answered from its own transcript and counted as not early."""
    from concurrent.futures import Future

    from fastvlm.speech import Transcript
    from fastvlm.speech.turn import TurnEnded, TurnLikelyEnded, TurnResumed
    from tests.unit.ui.test_ui_voice import FRAME

    def heard(text: str) -> Future:
        done = Future()
        done.set_result(Transcript(text, "en", 1.0, elapsed_s=0.01))
        return done

    def hear(taker, audio, chunk_s, on_event=None):
        on_event(TurnLikelyEnded(audio, 0.5, 1.5, heard("What am I holding"), None))
        deadline = time.monotonic() + 5
        while not asked and time.monotonic() < deadline:
            time.sleep(0.01)  # the early answer has begun
        on_event(TurnResumed(1.5))
        return TurnEnded(audio, 0.5, 2.5, False, heard(whole), "judge"), 2.6

    whole = "What am I holding in my right hand?"
    monkeypatch.setattr(turns, "hear_turn", hear)
    parser = argparse.ArgumentParser()
    voice.add_arguments(parser)
    args = parser.parse_args(["--tts", "espeak"])
    engine, speaker = make_engine(b"You hold a red cup.", delay=0.05), FakeSpeaker(tmp_path)
    asked = record_questions(engine)
    row = voice._one_turn(engine, FakeTranscriber(), speaker, object(), np.zeros(RATE, np.float32), 2.4, FRAME,
                          128, args)
    assert row["preemptive_cancelled"] == 1 and row["preemptive"] is False and row["transcript"] == whole
    assert asked == ["What am I holding", whole] and speaker.texts == ["You are holding"]  # the reference's words


def test_peoples_questions_missing_offline_are_one_line_before_any_model_loads(monkeypatch, caplog):
    from fastvlm.bench.people import recordings
    from fastvlm.speech import WhisperTranscriber

    def offline():
        raise recordings.PeopleMissing("pip could not download silero-vad==6.2.3 (is PyPI reachable?): ...")

    monkeypatch.setattr(recordings, "fetch", offline)
    monkeypatch.setattr(WhisperTranscriber, "load", classmethod(lambda cls, config: pytest.fail("Whisper loaded")))
    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    voice.add_arguments(parser)
    args = parser.parse_args(["--resolutions", "128", "--questions", "people"])
    assert voice.run(args, lambda a: pytest.fail("engine built")) == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "pip could not download silero-vad" in errors[0].getMessage()
