"""The code passes ruff with the rules chosen in pyproject.toml ([tool.ruff.lint]): pyflakes, pycodestyle's errors
and 120-character lines, bugbear, Python 3.10 idioms. ruff is pinned in requirements-dev.txt, so a newer ruff's new
rules never turn this red on their own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("fastvlm", "ui", "app.py", "tests", "deploy")


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *args],
                          cwd=cwd, capture_output=True, text=True, check=False, timeout=120)


def test_the_project_passes_ruff():
    done = ruff(*CHECKED)
    assert done.returncode == 0, (f"ruff found problems (fix them, or `python -m ruff check --fix`; ruff comes with "
                                  f"requirements-dev.txt):\n{done.stdout}{done.stderr}")


def test_the_rules_are_the_projects(tmp_path):
    """The check above reads pyproject.toml's rules: a file with a bug each rule family catches fails them."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "bad.py").write_text(
        "import os\n"  # F401: unused
        "from typing import Callable\n"  # UP035: collections.abc
        f"x = '{'a' * 120}'\n"  # E501: too long
        "def f(items=[]):\n"  # B006: mutable default
        "    return [lambda: i for i in items], Callable\n",  # B023: loop variable in a closure
        encoding="utf-8")
    found = ruff("bad.py", cwd=tmp_path).stdout
    for code in ("F401", "UP035", "E501", "B006", "B023"):
        assert code in found, (code, found)
