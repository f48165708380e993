"""What the app says at start-up when one of its settings will be slow on this CPU (pure: flags in, text out)."""

from __future__ import annotations

from ..engine.config import TRAINED_RESOLUTION
from ..engine.cpu import narrow_vectors


def slow_cpu_warning(resolution: int, flags: frozenset[str] | None = None) -> str | None:
    """What the app says at start-up when it will answer at 1024 px on a CPU with AVX2 but no AVX-512."""
    if resolution < TRAINED_RESOLUTION or not narrow_vectors(flags):
        return None
    return (f"this CPU has AVX2 but no AVX-512: a new image at {resolution} px may take several seconds to its first "
            "answer (6.1 s on a 2-core AMD EPYC without AVX-512, 1.4 s there at 512 px; docs/performance.md). "
            "--resolution 512 (FASTVLM_RESOLUTION=512) answers sooner; `python -m fastvlm doctor` says more")


def slow_voice_warning(turns: int, flags: frozenset[str] | None = None) -> str | None:
    """What the app says at start-up when a voice conversation's turns may hold up its answers on this CPU: they
    are prefilled while each answer is spoken, and a question asked before that is done waits (docs/voice.md)."""
    if not turns or not narrow_vectors(flags):
        return None
    return (f"this CPU has AVX2 but no AVX-512: the {turns} earlier turn(s) a spoken question carries are prefilled "
            "while the answer before it is spoken, ~1 s a turn of ~116 positions (question and answer) on a 2-core "
            "AMD EPYC without AVX-512 (3-4 s in all there, 6 s when the conversation's window moves on; "
            "docs/performance.md); a question asked over an answer waits for what is left of them. "
            "--voice-turns 1 or 0 (FASTVLM_VOICE_TURNS) answers sooner")
