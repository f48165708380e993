"""`bench`'s own arithmetic and routing, with the model work stubbed: each run kind summarised from its own rows,
the engine/raw ratios, the raw floor's warm-up dropped, the printed milliseconds, the load time, and which flags
are refused before anything loads."""

from __future__ import annotations

import argparse

import pytest

from fastvlm.bench import cli as bench_cli
from fastvlm.bench.runs import DEFAULT_PROMPTS


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--resolution", type=int, default=None)
    p.add_argument("--threads", type=int, default=1)
    bench_cli.add_arguments(p)
    return p.parse_args(argv)


def _row(kind: str, v: float) -> dict:
    return {m: v for m in bench_cli.METRICS} | {"kind": kind}


def test_each_kind_is_summarised_from_its_own_runs():
    summary = bench_cli._summaries([_row("cold", 1.0), _row("warm", 5.0), _row("cold", 3.0)])
    assert sorted(summary) == ["cold", "warm"]
    assert summary["cold"]["ttft_s"]["median"] == 2.0 and summary["cold"]["tokens"]["max"] == 3.0
    assert summary["warm"]["encode_s"]["min"] == summary["warm"]["encode_s"]["max"] == 5.0


def test_ratios_are_engine_over_raw():
    cold = {"ttft_s": {"median": 0.6}, "decode_tokens_per_s": {"median": 20.0}}
    assert bench_cli._ratios(cold, {"ttft_s": 0.4, "tokens_per_s": 25.0}) == \
        {"ttft_engine_over_raw": pytest.approx(1.5), "decode_engine_over_raw": pytest.approx(0.8)}
    assert bench_cli._ratios({}, {"ttft_s": 0.4, "tokens_per_s": 25.0}) == {}


def test_the_raw_floor_drops_its_warm_up_and_takes_medians(monkeypatch):
    import fastvlm.bench.raw as raw_mod

    asked = []

    class Raw:
        def __init__(self, engine):
            assert engine == "engine"

        def run(self, image, prompt, size, max_tokens):
            asked.append((image, prompt, size, max_tokens))
            n = len(asked)
            return {"ttft_s": 10.0 * n, "tokens_per_s": 1.0 / n}  # the warm-up run (n = 1) is the outlier

    monkeypatch.setattr(raw_mod, "RawBaseline", Raw)
    args = _args(["--warmup-runs", "1", "--num-runs", "3", "--max-tokens", "7"])
    got = bench_cli._raw("engine", ["a", "b"], ["p", "q", "r"], args, 512)
    assert asked == [("a", "p", 512, 7), ("b", "q", 512, 7), ("a", "r", 512, 7), ("b", "p", 512, 7)]
    assert got == {"ttft_s": 30.0, "tokens_per_s": pytest.approx(1 / 3)}  # runs 2-4


def test_blank_prompt_lines_are_dropped_and_an_empty_file_means_the_defaults(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("What is it?\n\n   \nDescribe.\n")
    assert bench_cli._inputs(_args(["--prompts", str(prompts)]))[1] == ["What is it?", "Describe."]
    prompts.write_text("\n \n")
    assert bench_cli._inputs(_args(["--prompts", str(prompts)]))[1] == list(DEFAULT_PROMPTS)


class Engine:
    resolution = 384

    def __init__(self):
        self.closed = False

    def describe(self):
        return {"model": "fake"}

    def close(self):
        self.closed = True


def test_a_run_times_the_load_and_uses_the_engines_size(monkeypatch, capsys):
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(bench_cli.time, "perf_counter", lambda: next(clock))
    seen = {}

    def timed_runs(engine, images, prompts, **kw):
        seen.update(kw)
        return []

    monkeypatch.setattr(bench_cli, "timed_runs", timed_runs)
    monkeypatch.setattr(bench_cli, "machine_info", lambda threads: {"threads": threads})
    engine = Engine()
    assert bench_cli.run(_args([]), lambda a: engine) == 0
    assert seen["size"] == 384 and engine.closed
    assert "fake @ 384 · load+warm-up 2.50 s" in capsys.readouterr().out


def test_printed_times_are_milliseconds(capsys):
    stat = {"median": 0.1234, "p90": 0.2, "min": 0.05}
    report = {"model": {"model": "m"}, "resolution": 512, "load_and_warm_up_s": 1.0,
              "summary": {"cold": {"ttft_s": stat, "encode_s": {"median": 0.08}, "prefill_s": {"median": 0.04},
                                   "decode_tokens_per_s": {"median": 21.0}}},
              "raw": {"ttft_s": 0.1, "encode_s": 0.07, "prefill_s": 0.03, "tokens_per_s": 22.0},
              "ratios": {"ttft_engine_over_raw": 1.234, "decode_engine_over_raw": 0.955},
              "soak": {"requests": 8, "rss_start_mib": 100, "rss_end_mib": 105, "rss_growth": 0.05,
                       "peak_rss_mib": 110, "temp_files_left": ["x"]}}
    bench_cli._print(report)
    out = capsys.readouterr().out
    assert "TTFT median 123 ms (p90 200, min 50) · encode 80 ms · prefill 40 ms · decode 21.0 tok/s" in out
    assert "raw: TTFT 100 ms (encode 70, prefill 30) · decode 22.0 tok/s" in out
    assert "TTFT engine/raw 1.234 · decode engine/raw 0.955" in out
    assert "soak: 8 requests, RSS 100 -> 105 MiB (+5.0 %), peak 110 MiB, temp files left: 1" in out


@pytest.mark.parametrize("argv, said", [
    (["--browser"], "--browser walks the journeys: add --journeys"),
    (["--echo", "3"], "--echo is a walk through the page: add --journeys --browser"),
    (["--journeys", "--echo", "3"], "--echo is a walk through the page"),
    (["--journeys", "--browser", "--echo-room"], "--echo-room is how the echo walk's answers reach the microphone"),
    (["--journeys", "--questions", "people"], "--questions chooses who speaks into the page's microphone"),
    (["--journeys", "--voice-slot-s", "40"], "--voice-slot-s paces the page's voice walk: add --journeys --browser"),
    (["--journeys", "--browser", "--voice-slot-s", "5"], "--voice-slot-s 5 is too short for a question and its answer"),
    (["--journeys", "--voice-answer-tokens", "96"], "--voice-answer-tokens is how long the page's spoken answers run"),
    (["--journeys", "--num-runs", "3"], "drop --num-runs (--num-runs, --warmup-runs, --max-tokens: only with --raw"),
    (["--journeys", "--raw", "--browser", "--num-runs", "3"], "drop --num-runs (--num-runs, --warmup-runs"),
])
def test_flags_that_cannot_go_together_are_refused_before_loading(caplog, argv, said):
    def never(args):
        raise AssertionError("engine built")

    assert bench_cli.run(_args(argv), never) == 2
    assert said in caplog.text


def test_the_journeys_get_the_voice_unless_told_and_the_load_is_recorded(monkeypatch, tmp_path):
    import json
    import os

    import fastvlm.bench.journey_report as jr

    calls = []
    monkeypatch.setattr(jr, "run_all", lambda engine, size, settings, threads, voice: calls.append(voice) or {})
    monkeypatch.setattr(jr, "verdicts", lambda journeys, size: {})
    monkeypatch.setattr(jr, "print_journeys", lambda report: None)
    monkeypatch.setattr(bench_cli, "machine_info", lambda threads: {})
    loads = iter([(1.5, 9.0, 9.0), (2.5, 9.0, 9.0)] * 2)
    monkeypatch.setattr(os, "getloadavg", lambda: next(loads))
    for flags, voice in (([], True), (["--no-voice"], False)):
        out = tmp_path / f"{voice}.json"
        assert bench_cli.run(_args(["--journeys", "--quick", *flags, "--report-json", str(out)]),
                             lambda a: Engine()) == 0
        report = json.loads(out.read_text())
        assert (report["load_before"], report["load_after"], report["resolution"]) == (1.5, 2.5, 384)
        assert report["cpu_steal_s"] is None or report["cpu_steal_s"] >= 0  # what the host took meanwhile
    assert calls == [True, False]


def test_compare_vision_names_a_missing_graph_and_defaults_to_both_sizes(monkeypatch, tmp_path):
    import fastvlm.bench.vision_compare as vc

    with pytest.raises(SystemExit, match=r"--compare-vision: no such file: .*absent.onnx"):
        bench_cli.run(_args(["--compare-vision", str(tmp_path / "absent.onnx")]), None)
    graph = tmp_path / "a.onnx"
    graph.write_bytes(b"x")
    asked = []
    monkeypatch.setattr(vc, "compare", lambda graphs, sizes, threads, runs: asked.append((sizes, runs)) or [])
    monkeypatch.setattr(vc, "print_rows", lambda rows: None)
    monkeypatch.setattr(bench_cli, "machine_info", lambda threads: {"cpu": "X", "cpu_features": []})
    assert bench_cli.run(_args(["--compare-vision", str(graph), "--num-runs", "1"]), None) == 0
    assert bench_cli.run(_args(["--compare-vision", str(graph), "--resolution", "768"]), None) == 0
    assert asked == [((512, 1024), 1), ((768,), 5)]
