""".ci/run on a bare machine, with stand-ins for every command it calls: it installs a compiler when there is
none, uses a virtual environment where the Python is externally managed (PEP 668), then runs the README's
test command."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Each stand-in appends its name and arguments to $CALLS. The python stand-in says "externally managed" to the
# PEP 668 probe when $MANAGED is set, and `-m venv DIR` writes an activate script that marks the venv active.
STUBS = {
    "apt-get": 'echo "apt-get $*" >> "$CALLS"',
    "id": "echo 0",
    "pip": 'echo "pip${VIRTUAL_ENV:+ (venv)} $*" >> "$CALLS"',
    "python": """
if [ "$1" = "-c" ]; then [ -n "$MANAGED" ] && [ -z "$VIRTUAL_ENV" ]; exit $?; fi
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; echo 'export VIRTUAL_ENV=1' > "$3/bin/activate"; fi
if [ "$1 $2" = "-m pytest" ]; then echo "CI=$CI" > "$CALLS.env"; fi
echo "python${VIRTUAL_ENV:+ (venv)} $*" >> "$CALLS"
""",
}


def run_ci(tmp_path: Path, present: list[str], managed: bool) -> list[str]:
    repo, bin_dir = tmp_path / "repo", tmp_path / "bin"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    bin_dir.mkdir()
    for name, body in {**STUBS, **{tool: "true" for tool in present}}.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(stat.S_IRWXU)
    for tool in ("dirname", "cat", "mkdir"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    calls = tmp_path / "calls"
    calls.touch()
    env = {"PATH": str(bin_dir), "CALLS": str(calls), "HOME": str(tmp_path), **({"MANAGED": "1"} if managed else {})}
    done = subprocess.run(["/bin/bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return calls.read_text().splitlines()


BROWSERS_AND_VOICES = ["chromium", "chromedriver", "espeak-ng", "sox", "qemu-x86_64"]


def test_a_bare_image_gets_a_compiler_then_runs_the_readme_test_command(tmp_path):
    calls = run_ci(tmp_path, BROWSERS_AND_VOICES, managed=False)
    install = next(c for c in calls if c.startswith("apt-get install"))
    assert "build-essential" in install and "cmake" in install
    assert "qemu-user" in install  # the portable-build test runs llama.cpp on an emulated Haswell
    assert "g++-11" in install and "g++-12" in install  # the AMX kernel test compiles with both
    assert "clang" in install.split()  # macOS's compiler family, for the build-settings test
    assert calls[-2:] == ["pip install -r requirements-dev.txt", "python -m pytest"]


def test_the_tests_run_with_ci_true_so_a_skip_for_a_missing_package_fails(tmp_path):
    run_ci(tmp_path, BROWSERS_AND_VOICES, managed=False)
    assert (tmp_path / "calls.env").read_text().strip() == "CI=true"


@pytest.mark.parametrize("managed", [True, False])
def test_an_externally_managed_python_gets_a_virtual_environment(tmp_path, managed):
    calls = run_ci(tmp_path, BROWSERS_AND_VOICES + ["cc", "c++", "make", "cmake", "g++-11", "g++-12", "clang"], managed)
    assert not any(c.startswith("apt-get") for c in calls)  # everything is there: nothing installed
    venv = " (venv)" if managed else ""
    assert calls[-2:] == [f"pip{venv} install -r requirements-dev.txt", f"python{venv} -m pytest"]
    assert any(c == "python -m venv .venv" for c in calls) == managed
