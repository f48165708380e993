"""The AMX probe's verdict (fastvlm.amx): a child that dies by a signal turns llama.cpp's extra buffers off for
every load and says how to fix it; the verdict is cached per llama.cpp build and CPU; CPUs without AMX run no
probe. The children here are stand-ins (a real SIGSEGV, a clean `ok`, an error exit); the real child is run by
tests/integration/test_amx_child.py."""

from __future__ import annotations

import html
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from fastvlm.amx import probe
from fastvlm.amx.policy import auto_quant, cpu_class, llama_settings
from fastvlm.amx.probe import Verdict, amx_verdict

AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"})
AVX512_BF16 = frozenset({"avx2", "avx512f", "avx512_bf16"})
AVX2 = frozenset({"avx2", "fma"})
SEGFAULT = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]  # a real SIGSEGV in the child
OK = [sys.executable, "-c", "print('ok sapphirerapids AMX_INT8')"]
ERROR = [sys.executable, "-c", "import sys; sys.exit('llama.cpp could not load the probe model')"]


def child(argv: list[str], calls: list | None = None):
    def command(folder: Path) -> list[str]:
        if calls is not None:
            calls.append(folder)
        return argv
    return command


def never(folder: Path) -> list[str]:
    raise AssertionError("the probe ran, but it should not have")


@pytest.fixture(autouse=True)
def _library(monkeypatch, tmp_path):
    """A stand-in llama.cpp build: two library files whose bytes make the cache key."""
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("libllama.so", "libggml-cpu-sapphirerapids.so"):
        (lib / name).write_bytes(name.encode() * 100)
    monkeypatch.setattr(probe, "llama_library_files", lambda: sorted(lib.iterdir()))
    return lib


def test_a_probe_that_dies_by_a_signal_turns_extra_buffers_off_and_names_the_fix(tmp_path):
    v = amx_verdict(tmp_path / "cache", child(SEGFAULT), flags=AMX, model="Xeon")
    assert (v.status, v.extra_buffers) == ("crashed", False)
    assert "SIGSEGV" in v.detail
    assert "AMX off" in v.notice and "-fno-dse" in v.notice and "pip uninstall -y llama-cpp-python" in v.notice
    assert "\n" not in v.notice  # one line
    settings = llama_settings(v)
    assert (settings.extra_buffers, settings.llama_notice) == (False, v.notice)


def test_the_verdict_is_cached_per_build_and_cpu(tmp_path, _library):
    cache = tmp_path / "cache"
    first = amx_verdict(cache, child(SEGFAULT), flags=AMX, model="Xeon")
    assert amx_verdict(cache, never, flags=AMX, model="Xeon") == first  # no second probe
    calls: list = []
    assert amx_verdict(cache, child(OK, calls), flags=AMX, model="another Xeon").status == "works"  # other CPU
    (_library / "libllama.so").write_bytes(b"rebuilt with -fno-dse")
    assert amx_verdict(cache, child(OK, calls), flags=AMX, model="Xeon").status == "works"  # other build
    assert len(calls) == 2


def test_a_probe_that_answers_keeps_amx_on(tmp_path):
    v = amx_verdict(tmp_path, child(OK), flags=AMX, model="Xeon")
    assert (v.status, v.extra_buffers, v.notice) == ("works", True, "")
    assert (v.variant, v.amx_kernels) == ("sapphirerapids", True)
    assert llama_settings(v).extra_buffers is True


def test_a_probe_that_fails_otherwise_is_off_for_this_run_and_asked_again(tmp_path):
    calls: list = []
    v = amx_verdict(tmp_path, child(ERROR, calls), flags=AMX, model="Xeon")
    assert (v.status, v.extra_buffers) == ("failed", False)
    assert "could not load the probe model" in v.detail and "\n" not in v.notice
    amx_verdict(tmp_path, child(ERROR, calls), flags=AMX, model="Xeon")
    assert len(calls) == 2


@pytest.mark.parametrize("flags", [AVX2, AVX512_BF16, frozenset({"amx_bf16", "amx_tile"})])
def test_a_cpu_without_amx_int8_runs_no_probe(tmp_path, flags):
    v = amx_verdict(tmp_path, never, flags=flags, model="EPYC")
    assert (v.status, v.extra_buffers, v.notice) == ("no-amx", True, "")


@pytest.mark.parametrize(("verdict", "flags", "klass", "quant"), [
    (Verdict("works", True, amx_kernels=True), AMX, "amx", "q8_0"),  # AMX int8 kernels: Q8_0
    (Verdict("works", True, amx_kernels=False), AMX, "bf16", "bf16"),  # a llama.cpp without AMX kernels
    (Verdict("crashed", False), AMX, "bf16", "bf16"),  # AMX broken here, native bf16 remains: BF16
    (Verdict("no-amx", True), AVX512_BF16, "bf16", "bf16"),
    (Verdict("no-amx", True), AVX2, "other", "q8_0"),
])
def test_quant_auto_per_cpu_class(verdict, flags, klass, quant):
    assert cpu_class(verdict, flags) == klass
    assert auto_quant(verdict, flags) == quant


def test_the_verdict_sets_the_model_load_parameters(tiny_models):
    """verdict -> EngineConfig -> llama_model_params.use_extra_bufts, on llama-cpp-python's own struct."""
    import llama_cpp

    from fastvlm.engine.config import EngineConfig
    from fastvlm.engine.lm import model_params

    config = EngineConfig(tiny_models.vision, tiny_models.llm)
    assert model_params(llama_cpp, config).use_extra_bufts is True
    crashed = Verdict("crashed", False, "the probe died by SIGSEGV")
    for verdict, on in ((crashed, False), (Verdict("works", True), True)):
        s = llama_settings(verdict)
        got = model_params(llama_cpp, replace(config, extra_buffers=s.extra_buffers, llama_notice=s.llama_notice))
        assert got.use_extra_bufts is on


def test_the_notice_reaches_describe_the_header_and_health():
    """describe() feeds the page's header, /health and `predict --json`: the verdict's one line is in all of them."""
    from fastvlm.engine.config import EngineConfig
    from fastvlm.engine.engine import Engine
    from tests.fakes import FakeLM, FakeVision
    from ui.widgets import header_markdown

    notice = Verdict("crashed", False, "the probe died by SIGSEGV").notice
    config = EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1, extra_buffers=False,
                          llama_notice=notice)
    info = Engine(FakeVision(), FakeLM(b"hi"), config).describe()
    assert info["llama_notice"] == notice
    assert html.escape(notice) in header_markdown(info, "FastVLM")  # shown as is (&& escaped for the page)
    assert "AMX" not in header_markdown({**info, "llama_notice": ""}, "FastVLM")
