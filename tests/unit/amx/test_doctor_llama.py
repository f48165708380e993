"""The doctor's llama.cpp section: the CPU variant and features llama.cpp runs, the AMX verdict with its fix, and
the CPU class with the type `--quant auto` picks (verdicts injected; llama.cpp itself is the installed one)."""

from __future__ import annotations

import pytest

from fastvlm.amx.probe import Verdict
from fastvlm.verify.doctor import llama as doctor_llama


@pytest.mark.parametrize(("verdict", "status", "klass"), [
    (Verdict("crashed", False, "the probe died by SIGSEGV"), "warn", "bf16: --quant auto writes BF16"),
    (Verdict("works", True, variant="sapphirerapids", amx_kernels=True), "ok", "amx: --quant auto writes Q8_0"),
])
def test_the_section_shows_variant_verdict_and_class(verdict, status, klass):
    section, got = doctor_llama.llama_section(verdict, frozenset({"avx512_bf16", "amx_int8", "amx_tile"}))
    rows = {c.label: c for c in section.checks}
    assert got is verdict
    assert rows["CPU variant"].detail and rows["features used"].detail
    assert rows["AMX"].status == status
    if status == "warn":
        assert "-fno-dse" in rows["AMX"].detail and "pip uninstall -y llama-cpp-python" in rows["AMX"].fix
    assert rows["CPU class"].detail == klass


def test_a_build_with_one_backend_built_in_is_a_warning_with_the_rebuild(monkeypatch):
    """pip reused an older native build (installed, or from its wheel cache): the doctor says so."""
    monkeypatch.setattr(doctor_llama, "cpu_variant", lambda: "built-in")
    section, _ = doctor_llama.llama_section(Verdict("no-amx", True), frozenset({"avx2"}))
    row = next(c for c in section.checks if c.label == "CPU variant")
    assert row.status == "warn" and "pip uninstall -y llama-cpp-python" in row.fix


def test_the_features_row_lists_what_llama_cpp_reports_or_says_none(monkeypatch):
    monkeypatch.setattr(doctor_llama, "features_in_use", lambda llama_cpp: ["AVX2", "AVX512"])
    section, _ = doctor_llama.llama_section(Verdict("no-amx", True), frozenset({"avx2"}))
    assert {c.label: c.detail for c in section.checks}["features used"] == "AVX2, AVX512"
    monkeypatch.setattr(doctor_llama, "features_in_use", lambda llama_cpp: [])
    section, _ = doctor_llama.llama_section(Verdict("no-amx", True), frozenset({"avx2"}))
    assert {c.label: c.detail for c in section.checks}["features used"] == "none reported"
