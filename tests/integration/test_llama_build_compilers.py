"""requirements.txt's llama.cpp build settings against the compilers that meet them: each platform's line is
configured by cmake, on the installed version's source, with that platform's compiler family. clang stands in for
Apple's (macOS builds with clang; the flags a driver accepts are the same on Linux): with the Linux line's GCC
flags it stops at its compiler check, which is why macOS has a line of its own. What macOS and Windows themselves
do with the build was not run here."""

from __future__ import annotations

import shutil

import pytest

from tests.installed import ci_installs
from tests.integration.conftest import compiler, configure
from tests.unit.amx.test_build_settings import llama_line_settings

needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason=ci_installs("cmake", "cmake missing"))


@needs_cmake
def test_clang_configures_the_macos_line_and_stops_at_the_linux_one(llama_source, tmp_path):
    cc, cxx = compiler("clang"), compiler("clang++")
    mac = configure(llama_source, tmp_path / "mac", cc, cxx, llama_line_settings("darwin", "arm64"))
    assert mac.returncode == 0, mac.stdout[-3000:] + mac.stderr[-3000:]
    linux = configure(llama_source, tmp_path / "linux", cc, cxx, llama_line_settings("linux", "x86_64"))
    assert linux.returncode != 0 and "-fno-dse" in linux.stdout + linux.stderr


@needs_cmake
def test_gcc_configures_the_linux_line(llama_source, tmp_path):
    done = configure(llama_source, tmp_path / "linux", compiler("gcc"), compiler("g++"), llama_line_settings())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
