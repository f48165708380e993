"""`bench --journeys --browser --quick` on the tiny models: every journey walked through the real page in headless
Chromium (smoke test: structure and sanity, never timing thresholds). Real-shape numbers come from the bench."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reports import odd_spans

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"upload_ask", "upload_ask_early", "snapshot", "live", "voice", "barge_in", "stop"}


def test_quick_browser_journeys_report_every_journey(sync_api, tiny_models, tmp_path):
    pytest.importorskip("faster_whisper")  # the voice journey (a skip that fails under CI: tests/installed.py)
    out, plot = tmp_path / "j.json", tmp_path / "j.png"
    # a process of its own, as a person runs it: Playwright's loop, eSpeak NG and CTranslate2 keep process state
    run = subprocess.run([sys.executable, "-m", "fastvlm", "bench", "--vision", str(tiny_models.vision), "--llm",
                          str(tiny_models.llm), "--no-download", "--resolution", "128", "--threads", "2", "--n-ctx",
                          "1024", "--journeys", "--browser", "--quick", "--report-json", str(out), "--plot", str(plot)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0 and plot.stat().st_size > 1000, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["driver"] == "browser" and report["machine"]["cpu"] and report["machine"]["cpu_features"]
    j = report["journeys"]
    assert set(j) == KEYS
    for key, r in j.items():
        assert r["median_s"] > 0 and r["p90_s"] >= r["median_s"], key
    for key in ("upload_ask", "upload_ask_early", "snapshot"):  # the page sees the answer after the engine's TTFT
        assert all(row["ttft_s"] >= row["page_ttft_s"] > 0 for row in j[key]["runs"]), (key, j[key]["runs"])
    # the first text seen is the new answer's, not the last one's while Gradio's progress text covers the readout
    assert all(row["first_text_after_ask_s"] > 0 for row in j["snapshot"]["runs"]), j["snapshot"]["runs"]
    live = j["live"]
    assert live["answered"] > 0 and live["answered"] + live["skipped"] == live["offered"]
    assert len(live["runs"]) == live["answered"]
    assert all(row["lag_s"] >= row["first_text_s"] > 0 for row in live["runs"])
    stops = j["stop"]["runs"]
    assert len(stops) == 2 * report["settings"]["repeats"] and {r["aimed_at"] for r in stops} == {"encode", "prefill"}
    voice = j["voice"]["runs"]
    assert voice and voice[0]["transcript"] and 0 <= j["voice"]["wer"] <= 1
    assert all(row["total_s"] > 0 for row in voice)
    barge = j["barge_in"]  # the bench's answers sound ~13 s (media.ReferenceSpeaker): the next question cuts one off
    assert barge["stopped"] >= 1 and barge["questions_shown"] >= 1, barge
    assert all(0 < row["stop_s"] < 3 and row["after_sound_s"] > 0 for row in barge["runs"]), barge
    assert report["page_decode_tokens_per_s"] > 0 and report["engine_decode_tokens_per_s"] > 0
    assert report["cpu_steal_s"] is None or report["cpu_steal_s"] >= 0  # the host's share is recorded
    assert set(report["targets_met"]) <= KEYS
    # every time is a span of this quick run, not a clock reading: the checks above only ask for more than 0. A
    # "share" is the difference of two readings of one moment (the bench's and the page readout's).
    odd = odd_spans(j, signed=("share",))
    assert not odd, odd
