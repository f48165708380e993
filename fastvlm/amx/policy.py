"""What the AMX verdict decides: the CPU class, `--quant auto`'s GGUF type, and the engine's llama.cpp settings.

CPU classes (fastest type at acceptable fidelity, measured in docs/performance.md):
- `amx`: AMX int8 works in this llama.cpp -> Q8_0 (llama.cpp's AMX int8 kernels; BF16 has none);
- `bf16`: native bf16 (AVX-512 BF16, or AMX whose int8 path crashes here) -> BF16 (exact to the checkpoint);
- `other`: -> Q8_0.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..engine.cpu import cpu_flags, native_bf16
from .probe import Verdict, amx_verdict

log = logging.getLogger(__name__)

QUANT_BY_CLASS = {"amx": "q8_0", "bf16": "bf16", "other": "q8_0"}


def cpu_class(verdict: Verdict, flags: frozenset[str] | None = None) -> str:
    flags = cpu_flags() if flags is None else flags
    if verdict.status == "works" and verdict.amx_kernels:
        return "amx"
    return "bf16" if native_bf16(flags) else "other"


def auto_quant(verdict: Verdict | None = None, flags: frozenset[str] | None = None) -> str:
    """`--quant auto` on this machine (runs the AMX probe on an AMX CPU, once per install)."""
    return QUANT_BY_CLASS[cpu_class(amx_verdict(flags=flags) if verdict is None else verdict, flags)]


@dataclass(frozen=True)
class LlamaSettings:
    """The EngineConfig fields the verdict decides."""

    extra_buffers: bool
    llama_notice: str


def llama_settings(verdict: Verdict | None = None) -> LlamaSettings:
    verdict = amx_verdict() if verdict is None else verdict
    if verdict.notice:
        log.warning("%s", verdict.notice)
    return LlamaSettings(extra_buffers=verdict.extra_buffers, llama_notice=verdict.notice)
