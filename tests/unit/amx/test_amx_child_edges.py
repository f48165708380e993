"""The AMX probe's reading of its child at the edges: an `ok` is believed only from a child that also exits 0,
a clean exit without `ok` is no answer; the child finds this checkout's `fastvlm` first; the verdict's cache
follows XDG_CACHE_HOME."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fastvlm.amx import probe


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("code, status", [
    ("print('ok haswell')", "works"),
    ("import sys; print('ok haswell'); sys.exit(3)", "failed"),  # said ok, then failed on the way out
    ("print('loaded the model')", "failed"),  # exit 0, but not the answer
])
def test_only_ok_and_exit_0_together_mean_the_amx_path_works(code, status):
    verdict = probe.run_child(_python(code))
    assert verdict.status == status and verdict.extra_buffers is (status == "works")
    if status == "works":
        assert (verdict.variant, verdict.amx_kernels) == ("haswell", False)
        assert verdict.summary == "this llama.cpp (haswell build) has no AMX kernels"


def test_a_child_that_names_no_variant_is_the_native_build():
    verdict = probe.run_child(_python("print('ok')"))
    assert verdict.variant == "" and verdict.summary == "this llama.cpp (native build) has no AMX kernels"


@pytest.mark.parametrize("outer", ["", "/elsewhere/lib"])
def test_the_child_finds_this_checkouts_fastvlm_first(monkeypatch, outer):
    monkeypatch.setenv("PYTHONPATH", outer)
    root = str(Path(probe.__file__).resolve().parents[2])
    assert probe._child_env()["PYTHONPATH"] == (f"{root}{os.pathsep}{outer}" if outer else root)


def test_the_verdicts_cache_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert probe.default_cache_dir() == tmp_path / "fastvlm"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert probe.default_cache_dir() == tmp_path / "home" / ".cache" / "fastvlm"


def test_a_child_that_hangs_or_cannot_start_leaves_amx_off_for_this_run(tmp_path):
    hung = probe.run_child(_python("import time; time.sleep(30)"), timeout_s=0.5)
    assert (hung.status, hung.extra_buffers, hung.detail) == ("failed", False, "no answer in 0 s")
    missing = probe.run_child([str(tmp_path / "no-such-python")])
    assert (missing.status, missing.extra_buffers) == ("failed", False) and "no-such-python" in missing.detail


def test_the_child_loads_with_llamas_extra_buffers_and_prefills_one_batch_of_many_rows(tmp_path, monkeypatch):
    """What makes the probe a probe of the AMX path, which a CPU without AMX cannot show: extra buffers on, and a
    prefill of more than one row (the tile kernel), plain text."""
    from fastvlm.amx import child
    from fastvlm.engine import lm as lm_module

    seen: dict = {}

    class RecordingLM:
        @classmethod
        def load(cls, config):
            seen["config"] = config
            return cls()

        def tokenize(self, text, special):
            seen["special"] = special
            return list(range(200))

        def prefill(self, segments):
            seen["rows"] = [len(s.ids) for s in segments]

        def generate(self, options):
            seen["max_new_tokens"] = options.max_new_tokens
            yield from (7, 8)

        def close(self):
            seen["closed"] = True

    monkeypatch.setattr(child, "write_probe_model", lambda folder: folder / "probe-q8_0.gguf")
    monkeypatch.setattr(lm_module, "LlamaLM", RecordingLM)
    child.run_probe(tmp_path, threads=1)
    assert seen["config"].extra_buffers and seen["config"].llm_path == tmp_path / "probe-q8_0.gguf"
    assert seen["rows"] == [child.PROBE_POSITIONS] and child.PROBE_POSITIONS > 1 and seen["special"] is False
    assert seen["max_new_tokens"] == 2 and seen["closed"]
