"""The summaries' edges (one value, two values, no values), the run count's argparse type, the machine's memory
and physical cores as psutil reports them, and the report written where asked."""

from __future__ import annotations

import argparse
import json
import math
from types import SimpleNamespace

import pytest

from fastvlm.bench.stats import machine_info, positive_int, summarize, write_report


def test_one_value_has_no_spread_and_two_have_theirs():
    assert summarize([]) == {}
    one = summarize([0.7])
    assert (one["n"], one["median"], one["p90"], one["std"]) == (1, 0.7, 0.7, 0.0)
    two = summarize([1.0, 3.0])
    assert (two["median"], two["p90"], two["std"]) == (2.0, 3.0, math.sqrt(2))


@pytest.mark.parametrize("text, count", [("1", 1), ("20", 20)])
def test_a_run_count_is_at_least_1(text, count):
    assert positive_int(text) == count


@pytest.mark.parametrize("text", ["0", "-3"])
def test_no_runs_is_refused_with_the_number_given(text):
    with pytest.raises(argparse.ArgumentTypeError, match=f"must be at least 1, got {text}"):
        positive_int(text)


def test_memory_in_gib_and_cores_counted_without_hyperthreads(monkeypatch):
    import psutil

    asked = []
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(total=int(24.37 * 2**30)))
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: asked.append(logical) or (1 if not logical else 2))
    info = machine_info(2, packages=("numpy", "no-such-package-here"))
    assert info["memory_gib"] == 24.4 and info["physical_cores"] == 1 and asked == [False]
    assert list(info["versions"]) == ["numpy"]  # a package not installed is left out


def test_the_report_is_written_with_its_folders_as_indented_json(tmp_path):
    path = tmp_path / "perf" / "2026" / "report.json"
    write_report(path, {"journeys": {"voice": {"median_s": 0.65}}})
    text = path.read_text()
    assert json.loads(text) == {"journeys": {"voice": {"median_s": 0.65}}}
    assert text.splitlines()[1] == '  "journeys": {'  # two spaces a level: what docs/perf/ holds


def test_cpu_time_the_host_took_during_a_run_is_its_share_of_all_cores(monkeypatch):
    """A shared host can halve a run's speed with no load of its own to show: the steal counter says so."""
    import psutil

    from fastvlm.bench import stats

    clock = {"steal": 100.0, "now": 50.0}
    monkeypatch.setattr(psutil, "cpu_times", lambda: SimpleNamespace(user=1.0, steal=clock["steal"]))
    monkeypatch.setattr(stats.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(stats.os, "cpu_count", lambda: 2)
    start = stats.host_clock()
    clock.update(steal=130.0, now=250.0)  # 30 s of 2 cores x 200 s taken
    assert stats.stolen_since(start) == {"cpu_steal_s": 30.0, "cpu_steal_share": 0.075}
    monkeypatch.setattr(psutil, "cpu_times", lambda: SimpleNamespace(user=1.0))  # not Linux: no steal counter
    assert stats.stolen_since(stats.host_clock()) == {"cpu_steal_s": None, "cpu_steal_share": None}
