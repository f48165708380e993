"""Shared fixtures: tiny random-weight models built once per machine (cached by the synth code's hash)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _synth_fingerprint() -> str:
    h = hashlib.sha256()
    for name in ("synth.py", "synth_tokenizer.py"):
        h.update((ROOT / "fastvlm" / name).read_bytes())
    return h.hexdigest()[:12]


def model_cache() -> Path:
    base = Path(os.environ.get("FASTVLM_TEST_CACHE", Path.home() / ".cache" / "fastvlm-tests"))
    return base / _synth_fingerprint()


@pytest.fixture(scope="session")
def tiny_models():
    """SynthPaths of the tiny models (seed 0), written once and reused across sessions."""
    from fastvlm.synth import SynthPaths, write_models

    out = model_cache() / "tiny-0"
    paths = SynthPaths(out / "vision.onnx", out / "llm.gguf")
    if not (paths.vision.is_file() and paths.llm.is_file()):
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        write_models(tmp, "tiny", 0)
        try:
            tmp.replace(out)  # atomic: a parallel session either wins or finds the folder there
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return paths


@pytest.fixture(scope="session")
def tiny_config(tiny_models):
    from fastvlm import EngineConfig

    return EngineConfig(vision_path=tiny_models.vision, llm_path=tiny_models.llm, resolution=128, threads=2, n_ctx=1024)


@pytest.fixture(scope="session")
def tiny_engine(tiny_config):
    from fastvlm.engine import Engine

    engine = Engine.load(tiny_config)
    yield engine
    engine.close()


def pytest_collection_modifyitems(config, items):
    """Browser tests last: Playwright's sync API keeps an event loop running in the main thread until the
    session ends, which would break later tests that call asyncio.run()."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
