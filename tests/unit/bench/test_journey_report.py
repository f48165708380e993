"""The journeys printout states each target with the statistic it is judged on, and judges that statistic."""

from __future__ import annotations

import pytest

from fastvlm.bench.journey_report import BROWSER_TARGETS, TARGETS, print_journeys, verdicts


def _timing(median: float, p90: float) -> dict:
    return {"median_s": median, "p90_s": p90, "min_s": median, "max_s": p90, "n": 5}


def report(journeys: dict, size: int = 1024) -> dict:
    return {"machine": {"cpu": "test CPU", "cpu_features": ["AVX2"], "threads": 2}, "resolution": size,
            "model": {"model": "m", "vision_runtime": "v"}, "load_before": 0.0, "journeys": journeys,
            "targets_met": verdicts(journeys, size)}


def test_stop_is_judged_on_the_statistic_the_printout_names(capsys):
    slow_sometimes = {"stop": _timing(0.05, 0.5), "upload_ask": _timing(0.1, 0.3)}
    met = verdicts(slow_sometimes, 1024)
    assert met["stop"] is False  # quick half the time is not quick: the p90 is judged
    assert met["upload_ask"] is True and "p90_s" in TARGETS["stop"]
    print_journeys(report(slow_sometimes))
    lines = {line.split(":")[0].strip(): line for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["stop"].endswith("MISSES target p90 ≤ 0.3 s")
    assert lines["upload_ask"].endswith("meets target median ≤ 0.2 s")


def test_the_printout_says_how_much_cpu_time_the_host_took_where_the_system_says(capsys):
    print_journeys({**report({}), "cpu_steal_share": 0.075})
    assert "load 0.00 · 7.5 % of the CPU time stolen by the host" in capsys.readouterr().out
    print_journeys({**report({}), "cpu_steal_share": None})
    assert "stolen" not in capsys.readouterr().out


def test_every_target_is_printed_with_its_statistic_and_wer_says_it_has_none(capsys):
    journeys = {"live": {**_timing(1.0, 2.0), "answered": 9, "offered": 10, "skipped": 1, "lag_s": 2.0},
                "voice": {**_timing(0.9, 1.1), "wer": 0.28}}
    print_journeys(report(journeys))
    out = capsys.readouterr().out
    assert "target skipped ≤ 10%, lag ≤ 4.0 s" in out
    assert "WER 0.28 (no target)" in out and "target median ≤ 1.0 s" in out


def test_the_walk_through_the_page_is_judged_on_the_page_targets(capsys):
    journeys = {"voice": {**_timing(0.95, 1.2), "wer": 0.0, "page_share_median_s": 0.091},
                "barge_in": _timing(0.2, 0.35)}
    assert verdicts(journeys, 512) == {"voice": False}  # engine-only, the voice's target at 512 is 0.8 s
    met = verdicts(journeys, 512, BROWSER_TARGETS)
    assert met == {"voice": True, "barge_in": False}
    assert verdicts(journeys, 1024, BROWSER_TARGETS) == {"barge_in": False}  # no voice target at 1024 there
    print_journeys({**report(journeys, 512), "targets": BROWSER_TARGETS, "targets_met": met})
    lines = {line.split(":")[0].strip(): line for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["voice"].endswith("meets target median ≤ 1.0 s")
    assert "the page's share 0.09 s" in lines["voice"]  # what the page adds to the server's own first sound
    assert lines["barge_in"].endswith("MISSES target p90 ≤ 0.3 s")


def test_a_walk_through_the_page_says_how_many_questions_were_cut_and_answered_again(capsys):
    journeys = {"voice": {**_timing(0.7, 1.1), "wer": 0.03, "cut": 1, "cut_answered_again": 1,
                          "cut_again_median_s": 0.84}}
    print_journeys({**report(journeys, 512), "targets": BROWSER_TARGETS, "targets_met": {}})
    line = capsys.readouterr().out.splitlines()[1]
    assert "1 cut off before the end of speech (not timed), 1 of them answered again 0.84 s after the end" in line


def test_the_echo_walk_is_judged_on_answers_cut_off_by_their_own_voice(capsys):
    def walk(stopped: int, stops: int, on: bool, heard: int = 0) -> dict:
        return {"echo_cancellation": on, "answers": 20 if on else 2, "answered": 20 if on else 2,
                "stopped": stopped, "stops": stops, "heard": heard, "runs": []}

    journeys = {"echo": walk(2, 2, True, heard=1), "echo_control": walk(2, 21, False)}
    met = verdicts(journeys, 512, BROWSER_TARGETS)
    assert met == {"echo": False}  # the control has no target: it only shows the loop reaches the microphone
    assert verdicts({"echo": walk(0, 0, True)}, 512, BROWSER_TARGETS) == {"echo": True}
    print_journeys({**report(journeys, 512), "targets": BROWSER_TARGETS, "targets_met": met})
    lines = {line.split(":")[0].strip(): line for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["echo"].endswith("2/20 answers cut off by their own voice, 1 taken for a question (2 stops; echo "
                                  "cancellation on) · MISSES target stopped ≤ 0, heard ≤ 0")
    assert lines["echo_control"].endswith("2/2 answers cut off by their own voice, 0 taken for a question (21 stops; "
                                          "echo cancellation off)")


def test_a_rule_that_never_ends_a_turn_misses_the_pauses_target(capsys):
    """A taker that hears no end of turn (e.g. a broken VAD) was scored '0 cut' and met the target."""
    import numpy as np

    from fastvlm.bench import turns

    class Deaf:
        def feed(self, rate, chunk):
            return []

        def settle(self, wait_s):
            return []

    q = turns.Spoken(np.zeros(1600, np.float32), "What is written on the sign?", 0.1, 0.09, (0.02, 0.05))
    res = turns.cut_off(lambda rule: Deaf(), ("semantic", "silence"), [q, q], chunk_s=0.05)
    assert res["semantic"]["cut"] == 0 and res["semantic"]["never_ended"] == 2
    journeys = {"turn_pauses": {"cut": 0, "never_ended": 2, "of": 2, "cut_silence": 0, "never_ended_silence": 2}}
    assert verdicts(journeys, 512) == {"turn_pauses": False}
    assert verdicts({"turn_pauses": journeys["turn_pauses"] | {"never_ended": 0}}, 512) == {"turn_pauses": True}
    print_journeys(report(journeys, 512))
    assert "never ended: semantic 2, fixed silence 2 · MISSES" in capsys.readouterr().out


def test_bench_voice_judges_each_size_on_the_voice_journeys_target(capsys):
    """bench-voice used one 1.5 s target at every size; the journeys judge the same turn at 0.8 s / 1.0 s."""
    from fastvlm.bench import voice

    row = {k: 0.1 for k in voice.STAGES} | {"total_s": 0.9, "voice": "espeak", "prepared_before_end": True,
                                            "early_stt_used": True}
    summary = {k: {"median": row[k], "p90": row[k]} for k in voice.STAGES}
    sizes = {size: {"runs": [row], "summary": summary, "load_before": 0, "load_after": 0}
             for size in ("512", "1024", "768")}
    rep = {"model": {"model": "m"}, "machine": {"threads": 2}, "questions_s": [2.3],
           "target_s": {str(k): v for k, v in voice.TARGET_S.items()}, "by_resolution": sizes}
    voice._print(rep)
    lines = {line.split(" px")[0].strip(): line for line in capsys.readouterr().out.splitlines() if " px:" in line}
    assert "misses the 0.8 s target" in lines["512"] and "meets the 1.0 s target" in lines["1024"]
    assert "no target at 768 px" in lines["768"]
    assert verdicts({"voice": {"median_s": 0.9}}, 512) == {"voice": False}  # the journeys agree


def test_the_voice_misses_when_its_first_sound_is_over_065_of_the_silence_rules_even_in_time(capsys):
    """Issue #22 sets two targets on the voice journey; the verdict judged only the median (the ratio was printed
    beside it, for a person to judge)."""
    quick = {"voice": {**_timing(0.7, 0.8), "wer": 0.0, "end_of_turn": "semantic", "over_silence": 0.68}}
    assert verdicts(quick, 512) == {"voice": False}
    assert verdicts({"voice": quick["voice"] | {"over_silence": 0.65}}, 512) == {"voice": True}
    assert verdicts({"voice": quick["voice"] | {"over_silence": 0.6, "median_s": 0.81}}, 512) == {"voice": False}
    print_journeys(report(quick, 512))
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("voice:")]
    assert "0.68× the fixed-silence rule" in line
    assert line.endswith("MISSES target median ≤ 0.8 s, ≤ 0.65× the fixed-silence rule")


def test_the_plot_draws_each_timed_journey_to_scale_with_its_target_in_red(tmp_path):
    from PIL import Image

    from fastvlm.bench.journey_report import draw_journeys

    nan = float("nan")
    journeys = {"upload_ask": _timing(0.1, 0.3), "stop": _timing(0.05, 0.5), "upload_ask_early": _timing(nan, nan)}
    path = draw_journeys(report(journeys, 512), tmp_path / "perf" / "plots" / "journeys.png")  # folders made
    img = Image.open(path).convert("RGB")
    assert img.size == (900, 60 + 34 * 2 + 20)  # two rows: a journey with no median (NaN) is left out
    scale = 0.5 * 1.1  # the longest p90 or target, with a tenth to spare

    def x(seconds: float) -> int:
        return round(160 + (900 - 160 - 60) * seconds / scale)

    blue, red, white = (66, 133, 244), (220, 0, 0), (255, 255, 255)
    for row, (median, p90, target) in enumerate(((0.1, 0.3, 0.2), (0.05, 0.5, 0.3))):
        y = 50 + row * 34 + 15  # the middle of the row's bar
        assert img.getpixel((x(median) - 2, y)) == blue and img.getpixel((170, y)) == blue  # the median, filled
        assert img.getpixel((x(median) + 3, y)) in (white, red)  # then the p90's outline only
        assert img.getpixel((x(p90), y)) == blue or img.getpixel((x(p90) - 1, y)) == blue
        assert img.getpixel((x(p90) + 3, y)) != blue
        assert img.getpixel((x(target), y - 10)) == red


def test_a_voice_question_cut_off_is_counted_and_left_out_of_the_journeys_times(monkeypatch):
    """As bench-voice: a turn ended at a pause before the question's end has no time to its answer (people's
    "And I say, [0.51 s] what in the world…" once entered bench-voice's median as -2.65 s)."""
    from fastvlm.bench import journey_report as jr
    from fastvlm.bench import journeys as j

    monkeypatch.setattr(j, "Frames", lambda seed: None)
    monkeypatch.setattr(j, "cold", lambda *a: {"ttft_s": 0.3, "encode_s": 0.1, "prefill_s": 0.1})
    monkeypatch.setattr(j, "prepare_then_ask", lambda *a: {"ttft_s": 0.1})
    monkeypatch.setattr(j, "live", lambda *a: {"answered_runs": [], "offered": 0, "skipped": 0})
    monkeypatch.setattr(j, "stop", lambda engine, frames, size, at, stages, tokens: {"to_idle_s": 0.01, "aimed_at": at})
    pauses = {"cut": 0, "never_ended": 0, "of": 20}
    said = {"semantic": [(0.6, False), (-2.65, True), (0.7, False)], "silence": [(1.0, False)] * 3}
    rows = {rule: [{"total_s": t, "cut": cut, "wer": 0.5 if cut else 0.0} for t, cut in runs]
            for rule, runs in said.items()}
    monkeypatch.setattr(j, "voice", lambda *a: {"pauses": {"semantic": pauses, "silence": pauses}, "rows": rows})
    out = jr.run_all(None, 512, j.JourneySettings(repeats=1), 2)
    assert (out["voice"]["median_s"], out["voice"]["n"], out["voice"]["cut"]) == (pytest.approx(0.65), 2, 1)
    assert out["voice"]["wer"] == pytest.approx(0.5 / 3) and out["voice_silence"]["cut"] == 0  # misheard, all counted
    assert out["voice"]["over_silence"] == pytest.approx(0.65)
