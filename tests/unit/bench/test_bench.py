import argparse

import numpy as np
from PIL import Image

from fastvlm import EngineConfig
from fastvlm.bench import cli as bench_cli
from fastvlm.bench.plot import draw
from fastvlm.bench.runs import fresh, sample_images, timed_runs
from fastvlm.bench.stats import summarize
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision


def test_summary_statistics_by_hand():
    s = summarize([4.0, 1.0, 3.0, 2.0, 10.0])
    assert (s["min"], s["max"], s["median"], s["mean"]) == (1.0, 10.0, 3.0, 4.0)
    assert s["p90"] == 10.0 and round(s["std"], 4) == 3.5355  # sqrt(50/4)


def test_machine_info_names_the_cpu_generation():
    """A VM's model name is often just "AMD EPYC": family, model and stepping say which one."""
    from fastvlm.bench.stats import machine_info
    from fastvlm.engine.cpu import parse_cpu_id

    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
            "stepping\t: 1\nflags\t\t: avx2\n\nprocessor\t: 1\ncpu family\t: 99\n")
    assert parse_cpu_id(text) == {"vendor": "AuthenticAMD", "family": "25", "model": "1", "stepping": "1"}
    info = machine_info(2)
    assert {"cpu", "cpu_features", "cpu_id"} <= set(info)  # the old keys stay
    assert set(info["cpu_id"]) <= {"vendor", "family", "model", "stepping"}


def test_p90_is_the_nearest_rank():
    """ordered[ceil(0.9 n) - 1]: rounding half to even gave 5 of 6 and 23 of 26, below 90 % of the values."""
    for n, want in ((5, 5.0), (6, 6.0), (10, 9.0), (16, 15.0), (26, 24.0), (1, 1.0)):
        assert summarize([float(i) for i in range(n, 0, -1)])["p90"] == want, n


def test_fresh_images_defeat_the_cache_but_keep_the_picture():
    img = sample_images(1)[0]
    a, b = np.array(fresh(img, 0)), np.array(fresh(img, 1))
    assert (a != b).sum() == 1 and (a != np.array(img)).sum() <= 4
    assert len({np.array(fresh(img, n)).tobytes() for n in (0, 256, 2**16, 2**24, 2**31)}) == 5  # 32 bits


def test_prepared_images_never_reach_a_cold_run():
    """Cold run 25 got prepared run 24's image (one byte, counters 25 and 1024 + 2 x 24 mod 256): a cache hit."""
    engine = _engine()
    recs = timed_runs(engine, sample_images(1), ["q"], runs=40, warmup=0, size=128, max_tokens=2,
                      follow_up=False, prepared=True)
    assert engine.vision.calls == 80  # 40 cold + 40 prepared encodes
    assert not any(r.embedding_cached for r in recs if r.kind == "cold")
    assert all(r.embedding_cached for r in recs if r.kind == "prepared")


def _engine():
    cfg = EngineConfig(vision_path="v", llm_path="m", resolution=128, threads=1)
    return Engine(FakeVision(), FakeLM(b"answer"), cfg)


def test_timed_runs_record_every_kind_and_skip_warm_up():
    engine = _engine()
    recs = timed_runs(engine, sample_images(2), ["q"], runs=3, warmup=1, size=128, max_tokens=8,
                      follow_up=True, prepared=True)
    assert [r.kind for r in recs].count("cold") == 3 and len(recs) == 9
    assert all(r.encode_s == 0 for r in recs if r.kind != "cold")  # follow-up and prepared reuse the embedding
    assert engine.vision.calls == 4 + 4  # one cold encode per run incl. warm-up, one per prepared image


def test_bench_cli_writes_report_and_plot(tmp_path):
    p = argparse.ArgumentParser()
    p.add_argument("--resolution", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    bench_cli.add_arguments(p)
    Image.new("RGB", (50, 40), "red").save(tmp_path / "a.png")
    args = p.parse_args(["--images", str(tmp_path), "--num-runs", "2", "--warmup-runs", "0", "--follow-up",
                         "--soak", "8", "--report-json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    assert bench_cli.run(args, lambda a: _engine()) == 0
    import json

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["summary"]["cold"]["ttft_s"]["n"] == 2 and report["soak"]["requests"] == 8
    assert report["soak"]["cancelled"] == 2
    assert Image.open(tmp_path / "p.png").size == (900, 420)


def _bench_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--resolution", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    bench_cli.add_arguments(p)
    return p.parse_args(argv)


def test_journeys_refuse_the_flags_they_would_ignore(caplog):
    def never(args):
        raise AssertionError("engine built")

    for flag, extra in (("--soak", ["3"]), ("--follow-up", []), ("--images", ["x.png"]), ("--prompts", ["p.txt"]),
                        ("--prepared", []), ("--num-runs", ["3"]), ("--warmup-runs", ["0"]), ("--max-tokens", ["8"]),
                        ("--num-runs", ["3", "--browser", "--raw"])):  # the page's walk has no raw floor
        caplog.clear()
        assert bench_cli.run(_bench_args(["--journeys", flag, *extra]), never) == 2, flag
        assert f"drop {flag}" in caplog.text, caplog.text
    # --raw's engine-only floor does use them (docs/performance.md's command line)
    assert bench_cli.journeys_conflict(_bench_args(["--journeys", "--raw", "--num-runs", "3"])) is None


def test_bad_bench_input_is_one_line_and_exit_2_before_the_model_loads(tmp_path, caplog, capsys):
    import pytest

    from fastvlm.bench import voice

    def never(args):
        raise AssertionError("engine built")

    for parse in (_bench_args, lambda argv: voice.add_arguments(p := argparse.ArgumentParser()) or p.parse_args(argv)):
        with pytest.raises(SystemExit) as e:  # was: exit 0 with nothing measured, an IndexError with --raw,
            parse(["--num-runs", "0"])  # a KeyError after the whole bench-voice run
        assert e.value.code == 2 and "--num-runs: must be at least 1, got 0" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    for argv, said in ((["--images", str(tmp_path / "empty")], "--images: no image files"),  # was ZeroDivisionError
                       (["--images", str(tmp_path / "absent.png")], "--images: no such file or folder"),
                       (["--prompts", str(tmp_path / "absent.txt")], "--prompts: no such file")):  # was a traceback
        caplog.clear()
        assert bench_cli.run(_bench_args(argv), never) == 2
        assert said in caplog.text


def test_plot_handles_one_run(tmp_path):
    row = dict(kind="cold", preprocess_s=0.01, encode_s=0.1, prefill_s=0.2, ttft_s=0.31)
    assert draw([row], tmp_path / "x.png", "t").exists()
