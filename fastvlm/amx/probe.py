"""Does this llama.cpp's AMX path work on this CPU? Asked once, in a child process, before the first model load.

llama.cpp 0.3.36 (llama-cpp-python's newest) built by GCC without `-fno-dse` loses the stores that fill the AMX
tile configuration and dies by SIGSEGV in `ggml_backend_amx_mul_mat` on the first Q8_0/Q4 batch (llama.cpp
issue #20824). A process cannot survive that, so the probe runs `fastvlm.amx.child` in a child process: it exits 0
(AMX works), or dies by a signal (AMX crashes: every load in this install then runs with llama.cpp's extra weight
buffers off, `EngineConfig.extra_buffers=False`), or fails otherwise (unknown: off for this run, asked again next
time). The verdict is cached per (llama.cpp library files' hash, CPU model and flags) in `cache_dir`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..engine.cpu import cpu_flags, cpu_model
from ..engine.llamalib import REINSTALL

log = logging.getLogger(__name__)

AMX_FLAGS = ("amx_int8", "amx_tile")
FLAGS_FIX = "-fno-dse -fno-tree-dse"
FIX = f"rebuild llama.cpp with requirements.txt's flags: {REINSTALL}"
TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Verdict:
    """`status`: works | crashed | failed | no-amx | no-llama. `extra_buffers`: what every load uses."""

    status: str
    extra_buffers: bool
    detail: str = ""  # the child's last words, or the signal it died by
    variant: str = ""  # the llama.cpp CPU variant the child ran (works only)
    amx_kernels: bool = False  # that backend was built with AMX int8 (works only; else AMX is simply unused)

    @property
    def notice(self) -> str:
        """One line for the header, /health, `predict --json` and `doctor`; empty when nothing is wrong."""
        if self.status == "crashed":
            return (f"AMX off: this llama.cpp build crashes in its AMX int8 kernels on this CPU ({self.detail}), so "
                    f"Q8_0/Q4 models run without AMX (slower); fix: {FIX} (they include {FLAGS_FIX})")
        if self.status == "failed":
            return f"AMX off for this run: the AMX check could not run ({self.detail}); it runs again next start"
        return ""

    @property
    def summary(self) -> str:
        build = f"{self.variant or 'native'} build"
        works = f"AMX int8 works ({build})" if self.amx_kernels else f"this llama.cpp ({build}) has no AMX kernels"
        return {"works": works, "no-amx": "no AMX on this CPU",
                "no-llama": "llama-cpp-python is not installed"}.get(self.status, self.notice)


def has_amx(flags: frozenset[str] | None = None) -> bool:
    flags = cpu_flags() if flags is None else flags
    return all(f in flags for f in AMX_FLAGS)


def llama_library_files() -> list[Path]:
    """llama-cpp-python's native libraries (libllama, libggml*, the CPU variants), found without importing it."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        return []
    return sorted(p for p in (Path(spec.origin).parent / "lib").glob("lib*.so*") if p.is_file())


def cache_key(files: list[Path], model: str, flags: frozenset[str]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    h.update(model.encode() + b"\0" + " ".join(sorted(flags)).encode())
    return h.hexdigest()


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fastvlm"


def child_command(folder: Path) -> list[str]:
    return [sys.executable, "-m", "fastvlm.amx.child", str(folder)]


def _child_env() -> dict[str, str]:
    """This process's environment, with the folder holding `fastvlm` first on PYTHONPATH (the app may have been
    started from another folder: `python /srv/fastvlm/app.py`)."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def run_child(command: list[str], timeout_s: float = TIMEOUT_S) -> Verdict:
    """Run the probe child and read its fate: exit 0 + `ok` / killed by a signal / anything else."""
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout_s,
                              env=_child_env())
    except subprocess.TimeoutExpired:
        return Verdict("failed", False, f"no answer in {timeout_s:.0f} s")
    except OSError as e:
        return Verdict("failed", False, str(e))
    last = (done.stderr.strip().splitlines() or [""])[-1][:200]
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return Verdict("crashed", False, f"the probe died by {name}")
    words = done.stdout.split()
    if done.returncode == 0 and words[:1] == ["ok"]:
        return Verdict("works", True, variant=words[1] if len(words) > 1 else "", amx_kernels="AMX_INT8" in words[2:])
    return Verdict("failed", False, f"exit {done.returncode}: {last}" if last else f"exit {done.returncode}")


def _read_cache(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def amx_verdict(cache_dir: Path | None = None, command=child_command, flags: frozenset[str] | None = None,
                model: str | None = None) -> Verdict:
    """The verdict for this install on this CPU: from the cache, or by running the probe once."""
    flags = cpu_flags() if flags is None else flags
    if not has_amx(flags):
        return Verdict("no-amx", True)
    files = llama_library_files()
    if not files:
        return Verdict("no-llama", True)
    cache = (cache_dir or default_cache_dir()) / "amx-probe.json"
    key = cache_key(files, cpu_model() if model is None else model, flags)
    known = _read_cache(cache)
    if key in known:
        return Verdict(**known[key])
    log.info("checking llama.cpp's AMX path on this CPU in a child process (once per install)")
    with tempfile.TemporaryDirectory(prefix="fastvlm-amx-") as tmp:
        verdict = run_child(command(Path(tmp)))
    if verdict.status in ("works", "crashed"):  # "failed" is asked again next time
        known[key] = asdict(verdict)
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(known, indent=1))
        except OSError as e:
            log.warning("could not cache the AMX verdict in %s: %s", cache, e)
    return verdict
