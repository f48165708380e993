"""README's claims that code decides: which runtime runs vision, and the statistic each journey target is judged on
(fastvlm.bench.journey_report.TARGETS); WER is reported without a target and says so."""

from __future__ import annotations

from pathlib import Path

from fastvlm.bench.journey_report import TARGETS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _paragraph(start: str) -> str:
    i = README.index(start)
    return README[i:README.index("\n\n", i)]


def _rows(label: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in README.splitlines()
            if line.startswith("|") and label in line]


def test_the_intro_names_the_default_vision_runtime():
    intro = _paragraph("Apple's FastVLM vision-language model, in one process")
    assert "OpenVINO" in intro and "fallback" in intro  # vision_runtimes: "auto" picks OpenVINO where it loads


def test_the_stop_rows_state_the_statistic_the_check_judges():
    (statistic,) = TARGETS["stop"]
    rows = _rows("Stop")
    assert len(rows) == 2
    for row in rows:
        assert row[-1].startswith(statistic.removesuffix("_s") + " ≤"), row


def test_rows_reporting_wer_say_it_has_no_target():
    rows = _rows("(WER)")
    assert rows and all("WER: no target" in row[-1] for row in rows)
