"""Fixtures of the integration tests that build llama.cpp's source."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from tests.installed import skip_missing, skip_missing_ci

CACHE = Path(os.environ.get("FASTVLM_TEST_CACHE", Path.home() / ".cache" / "fastvlm-tests"))


@pytest.fixture(scope="session")
def llama_source() -> Path:
    """The installed llama-cpp-python's sdist, unpacked without llama.cpp's models/ and docs/ (pip download once,
    kept in the test cache)."""
    version = importlib.metadata.version("llama-cpp-python")
    out = CACHE / f"llama-cpp-python-{version}-src"
    if (out / "CMakeLists.txt").is_file():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                              f"llama-cpp-python=={version}", "-d", tmp], capture_output=True, text=True, timeout=600)
        if got.returncode != 0:
            skip_missing("llama-cpp-python", f"its {version} sdist could not be downloaded: {got.stderr[-300:]}")
        with tarfile.open(next(Path(tmp).glob("*.tar.gz"))) as tar:
            part = [m for m in tar.getmembers() if not re.search(r"/vendor/llama\.cpp/(models|docs)/", m.name)]
            tar.extractall(tmp, members=part, filter="data")
        out.parent.mkdir(parents=True, exist_ok=True)
        staged = out.with_name(out.name + f".tmp{os.getpid()}")
        shutil.move(next(p for p in Path(tmp).iterdir() if p.is_dir()), staged)
        try:
            staged.rename(out)  # atomic: a parallel session either wins or finds the folder there
        except OSError:
            shutil.rmtree(staged, ignore_errors=True)
    return out


def compiler(name: str) -> str:
    """The path of the compiler `name` (g++-12, clang++...): .ci/run installs each, so under CI a missing one fails."""
    path = shutil.which(name)
    if path is None:
        package = "clang" if name.startswith("clang") else name
        skip_missing_ci(package, f"{name} missing: apt-get install {package}")
    return path


def configure(source: Path, build: Path, cc: str, cxx: str, settings: dict[str, str],
              **more: str) -> subprocess.CompletedProcess:
    """cmake's configure step of llama-cpp-python's `source` with a requirements line's `settings` (pip's
    `cmake.define.` names), the compilers `cc`/`cxx`, Release (scikit-build's default) and `more` definitions."""
    defines = {k.removeprefix("cmake.define."): v for k, v in settings.items()}
    defines.update(CMAKE_C_COMPILER=cc, CMAKE_CXX_COMPILER=cxx, CMAKE_BUILD_TYPE="Release", **more)
    return subprocess.run(["cmake", "-S", str(source), "-B", str(build), *(f"-D{k}={v}" for k, v in defines.items())],
                          capture_output=True, text=True, timeout=300, check=False)
