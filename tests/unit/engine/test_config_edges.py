"""The engine's configuration beyond the limits of tests/unit/test_settings_edges.py: which resolutions are
served, what a context too small is told, and the default thread count."""

import sys
from types import SimpleNamespace

import pytest

from fastvlm.engine import config
from fastvlm.engine.config import EngineConfig, check_resolution

FILES = {"vision_path": "v.onnx", "llm_path": "m.gguf"}


@pytest.mark.parametrize("size", [64, 512, 1024])
def test_a_resolution_is_a_multiple_of_64_from_64_to_1024(size):
    assert check_resolution(size) == size


@pytest.mark.parametrize("size", [0, 63, 65, 1000, 1088])
def test_any_other_resolution_is_refused(size):
    with pytest.raises(ValueError, match=f"multiple of 64 from 64 to 1024 .*got {size}"):
        check_resolution(size)


def test_a_context_too_small_says_what_the_image_alone_takes():
    with pytest.raises(ValueError, match=r"at least 512 \(the image alone takes 256 positions at 1024.*--n-ctx 512"):
        EngineConfig(**FILES, n_ctx=511)


@pytest.mark.parametrize(("physical", "logical", "threads"), [(4, 8, 4), (None, 8, 8), (None, None, 1)])
def test_threads_default_to_physical_cores(monkeypatch, physical, logical, threads):
    asked = []

    def cpu_count(logical=True):
        asked.append(logical)
        return physical

    monkeypatch.setitem(sys.modules, "psutil", SimpleNamespace(cpu_count=cpu_count))
    monkeypatch.setattr(config.os, "cpu_count", lambda: logical)
    assert config.physical_cores() == threads and asked == [False]  # hyper-threads are not counted
