"""`bench-voice` on the tiny models, end to end (real Silero, Whisper tiny.en, eSpeak NG questions): a turn as the
tab takes it, and the same turn with words ahead (the question's words prefilled while it is spoken), whose answer
then reuses more of the KV cache. Structure and effect, never timing thresholds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installed import skip_missing_ci

ROOT = Path(__file__).resolve().parents[2]


def bench_voice(models, out: Path, words_ahead_s: float, *extra: str) -> dict:
    # a process of its own, as a person runs it: eSpeak NG and CTranslate2 keep process-wide state
    run = subprocess.run([sys.executable, "-m", "fastvlm", "bench-voice", "--vision", str(models.vision), "--llm",
                          str(models.llm), "--no-download", "--n-ctx", "1024", "--threads", "2", "--resolutions", "128",
                          "--num-runs", "1", "--warmup-runs", "0", "--tts", "espeak", "--chunk-s", "0.04",
                          "--max-load", "99", "--words-ahead-s", str(words_ahead_s), "--report-json", str(out), *extra],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    [row] = json.loads(out.read_text())["by_resolution"]["128"]["runs"]
    return row


def test_words_heard_ahead_are_prefilled_and_reused(tiny_models, tmp_path):
    pytest.importorskip("faster_whisper")
    plain = bench_voice(tiny_models, tmp_path / "off.json", 0)
    ahead = bench_voice(tiny_models, tmp_path / "on.json", 0.4)
    for row in (plain, ahead):
        assert row["question"] == "What am I holding in my right hand?" and row["transcript"]
        assert row["prepared_before_end"] and row["ttft_s"] > 0
    assert plain["words_ahead"] == []  # off means off
    heard = [a for a in ahead["words_ahead"] if a["ok"] and a["done_before_end"]]
    said = ahead["transcript"].lower().split()
    assert any(said[:len(a["words"].split())] == a["words"].lower().split() for a in heard), ahead["words_ahead"]
    assert ahead["reused_tokens"] > plain["reused_tokens"]  # the answer only prefilled the rest


def test_people_ask_the_questions_with_questions_people(tiny_models, tmp_path):
    """`--questions people`: the first is the lecturer's "…how do I get to Dublin?" (fastvlm/bench/people)."""
    pytest.importorskip("faster_whisper")
    from fastvlm.bench.people import recordings

    try:
        recordings.read_member(recordings.SOURCES["lecture"], recordings.DEFAULT_DIR)
    except recordings.PeopleMissing as e:
        skip_missing_ci("silero-vad", f"people's speech is not downloaded: {e}")
    row = bench_voice(tiny_models, tmp_path / "people.json", 0, "--questions", "people")
    assert row["question"] == "and says, how do I get to Dublin?" and "dublin" in row["transcript"].lower(), row
