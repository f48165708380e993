"""Shared fixtures: tiny random-weight models built once per machine (cached by the synth code's hash); and the CI
rule: under CI=true a skip for want of something requirements*.txt installs is a failure (`tests.installed`)."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from tests.installed import broken_install, missing_from_ci_run

ROOT = Path(__file__).resolve().parents[1]


def _synth_fingerprint() -> str:
    h = hashlib.sha256()
    for name in ("synth/models.py", "synth/tokenizer.py", "convert/qwen2_gguf.py", "convert/quantize.py"):
        h.update((ROOT / "fastvlm" / name).read_bytes())
    return h.hexdigest()[:12]


def model_cache() -> Path:
    base = Path(os.environ.get("FASTVLM_TEST_CACHE", Path.home() / ".cache" / "fastvlm-tests"))
    return base / _synth_fingerprint()


@pytest.fixture(scope="session")
def tiny_models():
    """SynthPaths of the tiny models (seed 0), written once and reused across sessions."""
    from fastvlm.synth.models import SynthPaths, write_models

    out = model_cache() / "tiny-0"
    paths = SynthPaths(out / "vision.onnx", out / "llm.gguf")
    if not (paths.vision.is_file() and paths.llm.is_file()):
        _publish(out, lambda tmp: write_models(tmp, "tiny", 0))
    return paths


def _publish(out: Path, write) -> None:
    """`write(tmp)` into a private folder, then rename it to `out`: atomic, so a parallel session either wins
    or finds the folder there."""
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    write(tmp)
    try:
        tmp.replace(out)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def _apple_fingerprint() -> str:
    """The code that writes the Apple-layout checkpoint: a change rebuilds the cached one."""
    h = hashlib.sha256(_synth_fingerprint().encode())
    for name in ("synth/random_model.py", "synth/apple_layout.py", "convert/manifests/apple-FastVLM-0.5B.json",
                 "convert/checkpoint.py", "convert/safetensors_np.py", "convert/vocab.py"):
        h.update((ROOT / "fastvlm" / name).read_bytes())
    return h.hexdigest()[:12]


@pytest.fixture(scope="session")
def apple_checkpoint() -> Path:
    """A random-weight tiny FastVLM in Apple's exact llava_qwen2 layout (bf16 model.safetensors, Apple's config
    fields, slow-tokenizer files only; `apple_layout.write_apple_checkpoint("tiny", seed 0)`, from the manifest of
    Apple's own checkpoint), written once per machine and reused. Needs torch + timm + transformers to build."""
    out = model_cache() / f"apple-tiny-0-{_apple_fingerprint()}"
    if not (out / "model.safetensors").is_file():
        pytest.importorskip("torch")
        pytest.importorskip("timm")
        from fastvlm.synth.apple_layout import write_apple_checkpoint

        _publish(out, lambda tmp: write_apple_checkpoint(tmp, "tiny", 0))
    return out


@pytest.fixture(scope="session")
def tiny_config(tiny_models):
    from fastvlm import EngineConfig

    return EngineConfig(vision_path=tiny_models.vision, llm_path=tiny_models.llm, resolution=128, threads=2, n_ctx=1024)


@pytest.fixture(scope="session")
def tiny_engine(tiny_config):
    from fastvlm.engine.engine import Engine

    engine = Engine.load(tiny_config)
    yield engine
    engine.close()


CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _fail_broken_install(report) -> None:
    """Under CI a skip for want of something requirements*.txt or .ci/run installs is a failure (`tests.installed`)."""
    if not (CI and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if (requirement := broken_install(reason)) is not None:
        report.outcome = "failed"
        report.longrepr = (f"CI=true: skipped for want of {requirement}, which requirements*.txt installs, so the "
                           f"install is broken ({reason}). Fix: pip install -r requirements-dev.txt")
    elif (thing := missing_from_ci_run(reason)) is not None:
        report.outcome = "failed"
        report.longrepr = (f"CI=true: skipped for want of {thing}, which .ci/run installs, so the install is broken "
                           f"({reason}). Fix: bash .ci/run (as root), or run the tests without CI=true")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _fail_broken_install((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _fail_broken_install((yield).get_result())


def pytest_collection_modifyitems(config, items):
    """Browser tests last: Playwright's sync API keeps an event loop running in the main thread until the
    session ends, which would break later tests that call asyncio.run()."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
