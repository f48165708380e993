"""What this CPU can do: its model name and the vector extensions that decide precision and speed.

Read from /proc/cpuinfo (Linux); elsewhere the features are unknown and every "native" question answers
False, which keeps the exact f32 / Q8_0 choices.
"""

from __future__ import annotations

import functools
import platform

# The flags that matter for this engine, as /proc/cpuinfo spells them, with the names people know.
FEATURES = {
    "avx2": "AVX2",
    "fma": "FMA",
    "f16c": "F16C",
    "avx512f": "AVX-512",
    "avx512_vnni": "AVX-512 VNNI",
    "avx_vnni": "AVX-VNNI",
    "avx512_bf16": "AVX-512 BF16",
    "amx_bf16": "AMX BF16",
    "amx_int8": "AMX INT8",
}


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """(model name, flags) of the first processor in a /proc/cpuinfo text."""
    model, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return model, flags


@functools.lru_cache(maxsize=1)
def _read() -> tuple[str, frozenset[str]]:
    try:
        with open("/proc/cpuinfo") as f:
            return parse_cpuinfo(f.read())
    except OSError:
        return "", frozenset()


CPU_ID = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "stepping": "stepping"}


def parse_cpu_id(text: str) -> dict[str, str]:
    """Vendor, family, model and stepping of the first processor in a /proc/cpuinfo text (those present):
    what tells two CPUs with the same model name apart (a VM's "AMD EPYC" says nothing of its generation)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        name = CPU_ID.get(key.strip())
        if name is not None and name not in out:
            out[name] = value.strip()
    return out


@functools.lru_cache(maxsize=1)
def cpu_id() -> dict[str, str]:
    try:
        with open("/proc/cpuinfo") as f:
            return parse_cpu_id(f.read())
    except OSError:
        return {}


def cpu_model() -> str:
    return _read()[0] or platform.processor() or platform.machine()


def cpu_flags() -> frozenset[str]:
    return _read()[1]


def features(flags: frozenset[str] | None = None) -> list[str]:
    """The known features this CPU has, by their usual names (AVX2, AVX-512 BF16, AMX BF16, ...)."""
    flags = cpu_flags() if flags is None else flags
    return [name for flag, name in FEATURES.items() if flag in flags]


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when the CPU computes bf16 natively (AVX-512 BF16 or AMX): then bf16 is both exact to bf16
    weights and fast; elsewhere it is emulated and slow."""
    flags = cpu_flags() if flags is None else flags
    return bool({"avx512_bf16", "amx_bf16"} & flags)


def narrow_vectors(flags: frozenset[str] | None = None) -> bool:
    """True on a CPU with AVX2 but no AVX-512 (AMD before Zen 4, most Intel desktop CPUs): 256-bit vectors and
    no native bf16, where the f32 vision encoder is about 5x slower than on an AVX-512 BF16 CPU
    (docs/performance.md, "AVX2 without AVX-512")."""
    flags = cpu_flags() if flags is None else flags
    return "avx2" in flags and "avx512f" not in flags
