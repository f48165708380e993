"""What /proc/cpuinfo says about this CPU, parsed from its text: the first processor's model name and flags (x86
`flags`, ARM `Features`), the features the engine cares about by their usual names, native bf16, and the AVX2-only
class that docs/performance.md measures apart; the model name's fallbacks where the file says nothing."""

from __future__ import annotations

import pytest

from fastvlm.engine import cpu

EPYC = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 fma f16c "
        "avx512f avx512_bf16\n\nprocessor\t: 1\nmodel name\t: something else\nflags\t\t: fpu\n")
ARM = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x41\n"


def test_the_first_processors_model_and_flags_are_read():
    assert cpu.parse_cpuinfo(EPYC) == ("AMD EPYC 9R14", frozenset({"fpu", "avx2", "fma", "f16c", "avx512f",
                                                                   "avx512_bf16"}))
    assert cpu.parse_cpuinfo(ARM) == ("", frozenset({"fp", "asimd", "sve"}))  # ARM names no model here
    assert cpu.parse_cpuinfo("") == ("", frozenset())


def test_features_by_their_usual_names_in_a_fixed_order():
    flags = frozenset({"amx_int8", "avx2", "sse4_2", "avx512_bf16", "avx512f"})
    assert cpu.features(flags) == ["AVX2", "AVX-512", "AVX-512 BF16", "AMX INT8"]
    assert cpu.features(frozenset()) == []


@pytest.mark.parametrize("flags, bf16, narrow", [
    ({"avx2", "fma", "avx512f", "avx512_bf16"}, True, False),  # Zen 4, Sapphire Rapids without AMX in the VM
    ({"avx2", "avx512f", "amx_bf16"}, True, False),
    ({"avx2", "fma", "f16c"}, False, True),  # Zen 3, most desktops
    ({"avx2", "avx512f"}, False, False),  # Skylake-SP: wide vectors, no bf16
    ({"sse4_2"}, False, False),  # older than AVX2: not the class measured apart
    (set(), False, False),
])
def test_native_bf16_and_the_avx2_only_class(flags, bf16, narrow):
    assert cpu.native_bf16(frozenset(flags)) is bf16 and cpu.narrow_vectors(frozenset(flags)) is narrow


def test_with_no_flags_given_this_cpus_are_read(monkeypatch):
    monkeypatch.setattr(cpu, "_read", lambda: ("Zen 3", frozenset({"avx2", "fma"})))
    assert cpu.cpu_flags() == {"avx2", "fma"} and cpu.features() == ["AVX2", "FMA"]
    assert cpu.narrow_vectors() is True and cpu.native_bf16() is False
    assert cpu.cpu_model() == "Zen 3"


def test_a_cpu_with_no_model_name_is_named_by_the_platform(monkeypatch):
    monkeypatch.setattr(cpu, "_read", lambda: ("", frozenset()))
    monkeypatch.setattr(cpu.platform, "processor", lambda: "")
    monkeypatch.setattr(cpu.platform, "machine", lambda: "aarch64")
    assert cpu.cpu_model() == "aarch64"
    monkeypatch.setattr(cpu.platform, "processor", lambda: "arm")
    assert cpu.cpu_model() == "arm"
