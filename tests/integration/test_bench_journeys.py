"""`bench --journeys --quick` on the tiny models: every journey runs through the engine API the UI uses (smoke
test; structure and sanity, never timing thresholds). Real-shape numbers come from the bench itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fastvlm.bench.journey_report import verdicts
from tests.reports import odd_spans

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"upload_ask", "upload_ask_early", "snapshot", "live", "voice", "voice_silence", "turn_pauses", "stop", "cold"}


def test_quick_journeys_report_every_journey(tiny_models, tmp_path):
    pytest.importorskip("faster_whisper")
    out, plot = tmp_path / "j.json", tmp_path / "j.png"
    # a process of its own, as a person runs it: eSpeak NG and CTranslate2 keep process-wide state that would
    # otherwise carry into later speech tests
    run = subprocess.run([sys.executable, "-m", "fastvlm", "bench", "--vision", str(tiny_models.vision), "--llm",
                          str(tiny_models.llm), "--no-download", "--resolution", "128", "--threads", "2", "--n-ctx",
                          "1024", "--journeys", "--quick", "--raw", "--num-runs", "1", "--report-json", str(out),
                          "--plot", str(plot)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0 and plot.stat().st_size > 1000, run.stderr[-3000:]
    report = json.loads(out.read_text())
    j = report["journeys"]
    assert set(j) == KEYS
    for key, r in j.items():
        assert key == "turn_pauses" or r["median_s"] > 0 and r["p90_s"] >= r["median_s"], key
    live = j["live"]
    assert live["answered"] + live["skipped"] == live["offered"] == len(live["runs"]) + live["skipped"]
    assert all(row["lag_s"] >= row["end_s"] >= row["ttft_s"] > 0 for row in live["runs"])
    assert len(j["cold"]["runs"]) == report["settings"]["repeats"]  # one warm-up run made, and left out
    stops = j["stop"]["runs"]
    assert len(stops) == 2 * report["settings"]["repeats"] and all(r["idle"] for r in stops)
    assert {r["aimed_at"] for r in stops} == {"encode", "prefill"}
    assert all(isinstance(r["prepared"], bool) for r in j["upload_ask"]["runs"])
    assert 0 <= j["voice"]["wer"] <= 1 and j["voice"]["runs"][0]["transcript"]
    # both end-of-turn rules on the same questions, and the paused questions under each
    assert j["voice"]["end_of_turn"] == "semantic" and j["voice_silence"]["end_of_turn"] == "silence"
    assert {r["ended_by"] for r in j["voice_silence"]["runs"]} == {"silence"}
    assert j["voice"]["over_silence"] == j["voice"]["median_s"] / j["voice_silence"]["median_s"]
    pauses = j["turn_pauses"]
    assert pauses["of"] == report["settings"]["pause_questions"] == len(pauses["by_rule"]["silence"]["runs"])
    assert 0 <= pauses["cut"] <= pauses["of"] and 0 <= pauses["cut_silence"] <= pauses["of"]
    assert report["machine"]["cpu"] and report["raw"]["ttft_s"] > 0
    assert set(report["targets_met"]) <= KEYS
    # every time a span of this quick run (a paused question cut at its pause ends before its spoken end)
    odd = odd_spans(j, signed=("after_end_s",))
    assert not odd, odd


def test_verdicts_follow_the_targets_per_resolution():
    journeys = {"cold": {"median_s": 1.0}, "voice": {"median_s": 0.9, "over_silence": 0.6},
                "live": {"median_s": 1.0, "offered": 10, "skipped": 2, "lag_s": 3.0},
                "upload_ask_early": {"median_s": 9}}
    assert verdicts(journeys, 1024) == {"cold": True, "voice": True, "live": False}  # 20 % skipped
    assert verdicts(journeys, 512) == {"cold": False, "voice": False, "live": False}
    journeys["live"]["skipped"] = 1
    assert verdicts(journeys, 1024)["live"] is True
