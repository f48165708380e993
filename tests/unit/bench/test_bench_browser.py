"""The browser journeys' pure parts: readouts, the spoken-question slots, matching what the page recorded to
requests and questions, and the one-line failure without a browser."""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from fastvlm.bench.browser import media, walks
from fastvlm.bench.browser import page as pg
from fastvlm.bench.cli import add_arguments
from fastvlm.bench.browser.run import CAMERA_FPS, CAMERA_FRAMES, _voice, app_settings, browser_settings, voice_slot_s
from fastvlm.bench.journeys import JourneySettings

ROOT = Path(__file__).resolve().parents[3]


def test_readout_times_read_as_the_ui_writes_them():
    from ui.widgets import ms

    for seconds in (0.004, 0.64, 9.5, 12.34):
        assert pg.seconds(ms(seconds)) == pytest.approx(seconds, abs=0.051)


def test_the_voice_walk_asks_every_voice_slot_s_and_peoples_questions_get_room_to_fit():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = lambda *argv: JourneySettings.from_args(parser.parse_args(["--journeys", "--browser", *argv]))  # noqa: E731
    assert voice_slot_s(settings(), "espeak") == 12.0  # over the answer before, as the walk always asked
    assert voice_slot_s(settings("--voice-slot-s", "40"), "espeak") == 40.0  # each answer heard to its end
    assert voice_slot_s(settings("--quick"), "espeak") == 8.0
    assert voice_slot_s(settings("--quick"), "people") == 12.0  # their longest question takes 6.6 s
    assert voice_slot_s(settings("--quick", "--voice-slot-s", "30", "--words-ahead-s", "0.8"), "people") == 30.0
    assert settings("--words-ahead-s", "0.8").voice_words_ahead_s == 0.8


def test_spoken_answers_end_at_their_first_piece_unless_the_walk_asks_for_longer_ones():
    """Random weights never end a phrase, so by default a spoken answer is its first piece (5 tokens) and its
    decode is over before it sounds; `--voice-answer-tokens` lets questions asked over an answer meet its decode."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    voice_tokens = lambda *argv: app_settings(browser_settings(JourneySettings.from_args(  # noqa: E731
        parser.parse_args(["--journeys", "--browser", *argv])))).voice_max_new_tokens
    assert voice_tokens() == 5
    assert voice_tokens("--quick") == 5
    assert voice_tokens("--voice-answer-tokens", "96") == 96
    assert voice_tokens("--quick", "--voice-answer-tokens", "40") == 40
    with pytest.raises(SystemExit):
        parser.parse_args(["--voice-answer-tokens", "0"])


def test_no_question_of_the_voice_walk_sees_an_earlier_questions_camera_frame_again():
    """The fake webcam loops; a question asked a whole number of loops after another would get that one's frame,
    whose embeddings the engine has cached: its prepare would skip the encode, as no real camera allows."""
    loop_s = CAMERA_FRAMES / CAMERA_FPS
    for slot in (8.0, 12.0, 40.0):  # --quick, the default, and --voice-slot-s 40 (each answer heard to its end)
        for k in range(1, 5):
            off = k * slot % loop_s
            assert min(off, loop_s - off) > 1.0, f"question {k + 1} at a {slot} s slot sees question 1's frame again"


def test_spoken_questions_are_found_by_their_slot():
    spoken = media.SpokenQuestions(Path("q.wav"), ("a", "b", "c"), slot_s=10.0, lead_s=0.5, spoken_s=(2, 2, 2))
    assert [spoken.question_at(t) for t in (0.52, 10.6, 20.4, 30.5, 41.0)] == ["a", "b", "c", "a", "b"]


def test_the_bench_speaker_says_the_reference_piece_for_as_long_as_random_tokens_sounded(tmp_path):
    """What the random weights said is not synthesized (eSpeak reads it as numbers, far slower than a real first
    phrase); the reference piece is, and its sound repeats to the length the next question talks over."""
    import wave

    import numpy as np

    from fastvlm.speech import Speech
    from fastvlm.speech.audio import write_wav

    heard = []

    class Speaker:  # stands in for eSpeak NG: 0.3 s of a ramp per call
        def synthesize(self, text):
            heard.append(text)
            path = tmp_path / f"{len(heard)}.wav"
            write_wav(path, 22_050, np.arange(6615, dtype=np.int16))
            return Speech(path, "espeak-ng", "en-us")

    speech = media.ReferenceSpeaker(Speaker(), "You are holding", length_s=2.0).synthesize(" w129077 w9375")
    assert heard == ["You are holding"]
    with wave.open(str(speech.path), "rb") as w:
        samples = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        assert w.getframerate() == 22_050
    assert samples.size == 7 * 6615  # 2.0 s is 6.67 pieces of 0.3 s: 7 whole ones
    assert np.array_equal(samples.reshape(7, 6615), np.tile(np.arange(6615, dtype=np.int16), (7, 1)))


def test_quick_live_ticks_at_whole_seconds_at_least_three_times():
    quick = browser_settings(JourneySettings.quick())
    assert quick.cadence_s == 1.0 and quick.live_s == 3.0
    assert browser_settings(JourneySettings()) == JourneySettings()  # the defaults are the tab's own


@dataclass
class Stats:
    ttft_s: float


class Recorded:
    def __init__(self, requests):
        self.requests = requests

    def answered_since(self, t):
        return [r for r in self.requests if r["at"] >= t and not r["busy"]]


def test_live_rows_match_answered_requests_to_feed_items_in_order():
    feed = '<li class="feed-item {}"><span class="feed-meta">{} · TTFT {}</span>'
    log = [(101.5, "feed", feed.format("answering", "10:00:01", "…")),
           (102.0, "feed", feed.format("done", "10:00:01", "300 ms")),
           (109.8, "feed", feed.format("answering", "10:00:09", "…") + feed.format("done", "10:00:01", "300 ms")),
           (110.5, "feed", feed.format("done", "10:00:09", "1.2 s") + feed.format("done", "10:00:01", "300 ms"))]
    engine = Recorded([{"at": 101.0, "busy": False, "stats": Stats(0.3)}, {"at": 105.0, "busy": True, "stats": None},
                       {"at": 109.0, "busy": False, "stats": Stats(1.2)}])
    rows = walks._live_rows(engine, log, 100.0)
    assert [(r["first_text_s"], r["lag_s"], r["page_ttft_s"]) for r in rows] == [
        (pytest.approx(0.5), pytest.approx(1.0), 0.3), (pytest.approx(0.8), pytest.approx(1.5), 1.2)]


def test_two_live_answers_in_the_same_second_are_two_rows():
    """Feed items were told apart by their time to the second: two quick answers became one row, and the quick
    browser journeys failed their 'a row per answer' check now and then."""
    feed = '<li class="feed-item {}"><span class="feed-meta">{} · TTFT {}</span>'
    log = [(100.4, "feed", feed.format("done", "10:00:01", "100 ms")),
           (100.9, "feed", feed.format("done", "10:00:01", "120 ms") + feed.format("done", "10:00:01", "100 ms"))]
    engine = Recorded([{"at": 100.2, "busy": False, "stats": Stats(0.1)}, {"at": 100.6, "busy": False,
                                                                          "stats": Stats(0.12)}])
    rows = walks._live_rows(engine, log, 100.0)
    assert [(r["first_text_s"], r["page_ttft_s"]) for r in rows] == [(pytest.approx(0.2), 0.1),
                                                                     (pytest.approx(0.3), 0.12)]


def test_voice_rows_pair_each_question_with_the_first_sound_before_the_next():
    spoken = media.SpokenQuestions(Path("q.wav"), ("What am I holding?", "Read the page."), 10.0, 0.5, (1.5, 1.2))
    rec = {"mic_opened": 0.0, "speech_starts": [0.5, 10.5, 20.5], "speech_ends": [2.0, 11.7, 22.0],
           "plays": [3.1, 21.0 + 2.2],  # the second question was never answered
           "log": [(2.9, "transcript", "What am I holding?"), (3.0, "readout", "STT 300 ms · TTFT 90 ms · first sound"
                    " 900 ms after you stopped"), (22.5, "transcript", "What am I folding?")]}
    rows = walks._voice_rows(rec, spoken)
    assert [(r["question"], r["transcript"], r["wer"]) for r in rows] == [
        ("What am I holding?", "What am I holding?", 0.0), ("What am I holding?", "What am I folding?", 0.25)]
    assert rows[0]["total_s"] == pytest.approx(1.1)
    assert (rows[0]["page_stt_s"], rows[0]["page_ttft_s"], rows[0]["page_first_sound_s"]) == (0.3, 0.09, 0.9)
    assert rows[1]["page_first_sound_s"] is None
    summary = _voice({"runs": rows, "heard": 3, "talked_over": 1, "mic_lead_s": 0.5})
    assert summary["page_share_median_s"] == pytest.approx(0.2)  # 1.1 s on the page, 0.9 s of it the server's own
    assert summary["talked_over"] == 1  # the walk's count of questions that stopped the answer before


def test_a_question_paused_in_is_one_question_and_one_answered_before_its_end_is_cut():
    """People pause mid-question: a second start in the same slot (600 ms of quiet) is the same question, whose
    speech ends its known length after the slot's first start. An answer sounding before that end was to a question
    cut off: counted as cut, with the transcript it was taken as, and left out of the times."""
    spoken = media.SpokenQuestions(Path("q.wav"), ("And I say, what now?", "Who is it?"), 10.0, 0.5, (3.0, 1.0))
    rec = {"mic_opened": 0.0, "speech_starts": [0.5, 1.8, 10.5], "speech_ends": [1.1, 3.5, 11.5],
           "plays": [4.1, 11.2, 12.3],
           "log": [(3.7, "transcript", "And I say, what now?"), (11.0, "transcript", "Who?"),
                   (11.9, "transcript", "is it?")]}
    rows = walks._voice_rows(rec, spoken)
    assert [(r["question"], r["cut"], r["transcript"]) for r in rows] == [
        ("And I say, what now?", False, "And I say, what now?"), ("Who is it?", True, "Who?")]
    assert rows[0]["total_s"] == pytest.approx(0.6) and rows[1]["total_s"] == pytest.approx(-0.3)
    assert rows[1]["last_transcript"] == "is it?"  # what the page showed last for it
    assert rows[0]["rest_s"] is None and rows[1]["rest_s"] == pytest.approx(0.8)  # it sounded again at 12.3 s
    summary = _voice({"runs": rows, "heard": 2, "talked_over": 0, "mic_lead_s": 0.5})
    assert summary["cut"] == 1 and summary["n"] == 1 and summary["median_s"] == pytest.approx(0.6)
    assert summary["cut_answered_again"] == 1 and summary["cut_again_median_s"] == pytest.approx(0.8)
    assert summary["wer"] == 0.0 and len(summary["runs"]) == 2  # the WER of the questions not cut off


def test_barge_rows_say_how_long_after_the_answer_sounded_each_question_began():
    rec = {"speech_starts": [0.5, 5.0, 9.3], "plays": [3.0, 8.9]}
    hushes = [{"at": 5_200.0, "stopped": 1}, {"at": 9_720.0, "stopped": 1}, {"at": 12_000.0, "stopped": 0}]
    rows = walks.barge_rows(rec, hushes)
    assert [(r["stop_s"], r["after_sound_s"]) for r in rows] == [
        (pytest.approx(0.2), pytest.approx(2.0)), (pytest.approx(0.42), pytest.approx(0.4))]  # the second: echo guard
    assert walks.barge_rows({"speech_starts": [1.0], "plays": []}, [{"at": 1_300.0, "stopped": 1}])[0][
        "after_sound_s"] is None
    spoken = media.SpokenQuestions(Path("q.wav"), ("a", "b"), slot_s=4.5, lead_s=0.5, spoken_s=(1, 1))
    rows = walks.barge_rows({**rec, "mic_opened": 0.0}, hushes, spoken=spoken)
    assert [r["question"] for r in rows] == ["b", "a"]  # 5.0 s: the second slot's; 9.3 s: the loop's first again
    paused = {"mic_opened": 0.0, "speech_starts": [5.0, 6.2], "plays": [3.0]}  # "b" paused at 5.6-6.2 s
    stills = [{"at": 5_200.0, "stopped": 1}, {"at": 6_500.0, "stopped": 1}]  # then its own answer was held
    assert [(r["question"], r["stop_s"]) for r in walks.barge_rows(paused, stills, spoken=spoken)] == [
        ("b", pytest.approx(0.2))]  # one question, stopped once


def test_a_barge_in_row_stops_at_the_hold_and_a_hold_that_played_on_is_no_stop():
    rec = {"speech_starts": [5.0, 9.0], "plays": [3.0]}
    holds = [{"at": 5_160.0, "sounding": 1, "resumed": None},  # the question: held, then hushed
             {"at": 9_160.0, "sounding": 1, "resumed": 9_500.0}]  # a cough: held, then played on
    hushes = [{"at": 5_300.0, "stopped": 1}]
    rows = walks.barge_rows(rec, hushes, holds)
    assert [(r["stop_s"], r["by"]) for r in rows] == [(pytest.approx(0.16), "hold")]


def test_peoples_questions_missing_offline_are_one_line_before_the_models_load(monkeypatch, caplog):
    import argparse

    from fastvlm.bench import cli as bench_cli
    from fastvlm.bench.browser import run, serve
    from fastvlm.bench.people import recordings

    def offline():
        raise recordings.PeopleMissing("pip could not download pyannote.audio==4.0.7 (is PyPI reachable?): ...")

    monkeypatch.setattr(serve, "sync_playwright", lambda: None)  # a browser is there
    monkeypatch.setattr(recordings, "fetch", offline)
    parser = argparse.ArgumentParser()
    parser.add_argument("--resolution", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    bench_cli.add_arguments(parser)
    args = parser.parse_args(["--journeys", "--browser", "--questions", "people"])
    assert run.run(args, lambda a: pytest.fail("engine built")) == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "pip could not download pyannote.audio" in errors[0].getMessage()


def test_without_chromium_the_bench_fails_with_one_line_naming_the_fix(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "CHROMIUM": str(tmp_path / "no-chromium"), "HOME": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "fastvlm", "bench", "--journeys", "--browser", "--no-download",
                          "--vision", str(tmp_path / "v.onnx"), "--llm", str(tmp_path / "l.gguf")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    errors = [line for line in run.stderr.splitlines() if "ERROR" in line]
    assert run.returncode == 2 and len(errors) == 1, run.stderr[-2000:]
    assert "apt-get install chromium" in errors[0] and "no-chromium" in errors[0]
