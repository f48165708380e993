"""The first run on a machine with internet, against a local fake Hub holding project-built files under the
published repo and file names: no model flags -> download (progress shown) -> answer; offline afterwards from
the cache; a missing candidate falls through to the next; nothing available -> one message; resume."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests import graphs
from tests.fakehub import FakeHub
from tests.unit.ui.test_ui_app import free_port

ROOT = Path(__file__).resolve().parents[2]
ONNX_COMMUNITY, VISION_1024 = "onnx-community/FastVLM-0.5B-ONNX", "musk12/apple-fastvlm-vision-encoder-1024"
GGUF_NEW, GGUF_OLD = "musk12/apple-fastvlm-cpu-inference-models", "musk12/apple-fastvlm-qwen2-q4-gguf"


@pytest.fixture(scope="module")
def published(tiny_models, tmp_path_factory):
    """Project-built files shaped like the published ones (see fastvlm/weights/sources.py)."""
    d = tmp_path_factory.mktemp("published")
    src = tiny_models.vision
    ext = graphs.external_weights(src, d / "vision_encoder.onnx")
    return {
        ONNX_COMMUNITY: {"onnx/vision_encoder.onnx": ext,
                         "onnx/vision_encoder.onnx_data": d / "vision_encoder.onnx_data",
                         "onnx/vision_encoder_fp16.onnx": graphs.float16_io(src, d / "fp16.onnx"),
                         "onnx/decoder_model_merged.onnx": b"not used"},
        VISION_1024: {"vision_encoder_fp32.onnx": graphs.fixed_size(src, d / "fixed.onnx", 1024),
                      "vision_encoder_safe_fp16.onnx": graphs.float16_io(src, d / "f16b.onnx"),
                      "vision_encoder_int8.onnx": src},
        GGUF_NEW: {"fastvlm_qwen2_Q4_K_M.gguf": tiny_models.llm, "README.md": b"# a model card"},
        GGUF_OLD: {"fastvlm_qwen2_q4km.gguf": tiny_models.llm},
    }


def hub_with(published: dict, *repos: str) -> FakeHub:
    hub = FakeHub()
    for repo in repos:
        for path, content in published[repo].items():
            hub.add(repo, path, content)
    return hub.start()


@pytest.fixture
def photo(tmp_path) -> Path:
    path = tmp_path / "photo.png"
    Image.new("RGB", (120, 80), (200, 30, 40)).save(path)
    return path


def env_for(hub_url: str, home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FASTVLM_", "HF_"))}
    return {**env, "HF_ENDPOINT": hub_url, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1", **extra}


def predict(env: dict, photo: Path, *flags: str, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "fastvlm", "predict", "--image", str(photo), "--prompt", "What is it?",
           "--max-tokens", "8", "--threads", "2", "--n-ctx", "1024", "--json", *flags]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_no_flags_downloads_then_answers_offline_from_the_cache(published, photo, tmp_path):
    hub = hub_with(published, ONNX_COMMUNITY, VISION_1024, GGUF_NEW, GGUF_OLD)
    try:
        first = predict(env_for(hub.url, tmp_path / "hf"), photo)
        assert first.returncode == 0, first.stderr
        out = json.loads(first.stdout)
        assert out["answer"] and out["image_tokens"] == 256  # 1024 px by default
        assert out["sources"]["vision"] == f"{ONNX_COMMUNITY}/onnx/vision_encoder.onnx (downloaded)"
        assert out["sources"]["llm"] == f"{GGUF_NEW}/fastvlm_qwen2_Q4_K_M.gguf (downloaded)"
        assert "downloading" in first.stderr  # progress on the console
        fetched = hub.file_requests("GET")
        assert f"/{ONNX_COMMUNITY}/resolve/main/onnx/vision_encoder.onnx_data" in fetched  # its weights file too
        assert not any("decoder_model" in p or VISION_1024 in p for p in fetched)
        before = len(hub.requests)
        second = predict(env_for(hub.url, tmp_path / "hf", HF_HUB_OFFLINE="1"), photo)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["answer"] == out["answer"]
        assert json.loads(second.stdout)["sources"]["vision"].endswith("(Hugging Face cache)")
        assert len(hub.requests) == before  # not one request for weights
    finally:
        hub.stop()


def test_missing_candidates_fall_through_to_a_fixed_size_graph(published, photo, tmp_path):
    hub = hub_with(published, VISION_1024, GGUF_OLD)
    try:
        env = env_for(hub.url, tmp_path / "hf")
        run = predict(env, photo, "--vision-runtime", "onnxruntime")
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert out["sources"] == {"vision": f"{VISION_1024}/vision_encoder_fp32.onnx (downloaded)",
                                  "llm": f"{GGUF_OLD}/fastvlm_qwen2_q4km.gguf (downloaded)"}
        assert out["image_tokens"] == 256
        refused = predict(env, photo, "--resolution", "512", "--vision-runtime", "onnxruntime")
        assert refused.returncode == 2 and "1024×1024 only" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        hub.stop()


def test_nothing_available_is_one_clear_message_quickly(photo, tmp_path):
    hub = FakeHub().start()  # a Hub without any of the repos
    try:
        run = predict(env_for(hub.url, tmp_path / "hf"), photo)
    finally:
        hub.stop()
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "FastVLM weights are not available" in run.stderr and "--models DIR" in run.stderr
    t = time.perf_counter()
    port = free_port()  # nothing listens there: an unreachable Hub
    run = predict(env_for(f"http://127.0.0.1:{port}", tmp_path / "hf2"), photo)
    assert run.returncode == 2 and "could not be reached" in run.stderr
    assert time.perf_counter() - t < 60  # one quick failed request, not a minute of retries per file


def test_an_interrupted_download_is_retried_and_completes(published, photo, tmp_path):
    """huggingface_hub retries a cut transfer itself ("Trying to resume download..."); the file in the cache is
    whole and nothing partial is left behind."""
    hub = hub_with(published, ONNX_COMMUNITY, GGUF_NEW)
    gguf = published[GGUF_NEW]["fastvlm_qwen2_Q4_K_M.gguf"]
    hub.cut_after[f"{GGUF_NEW}/fastvlm_qwen2_Q4_K_M.gguf"] = gguf.stat().st_size // 2
    try:
        run = predict(env_for(hub.url, tmp_path / "hf"), photo)
    finally:
        hub.stop()
    assert run.returncode == 0, run.stderr
    assert "resume" in run.stderr and len([p for p in hub.file_requests() if p.endswith(".gguf")]) == 2
    cached = next((tmp_path / "hf" / "hub").glob("models--musk12--apple-fastvlm-cpu-inference-models/"
                                                 "snapshots/*/*.gguf"))
    assert cached.read_bytes() == gguf.read_bytes()
    assert not list((tmp_path / "hf" / "hub").glob("**/*.incomplete"))


def test_the_app_with_no_model_flags_downloads_while_serving_the_page(published, tmp_path):
    hub = hub_with(published, ONNX_COMMUNITY, GGUF_NEW)
    port = free_port()
    env = env_for(hub.url, tmp_path / "hf")
    proc = subprocess.Popen([sys.executable, "app.py", "--port", str(port), "--no-voice", "--threads", "2",
                             "--n-ctx", "1024"], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        health = _wait_ready(f"http://127.0.0.1:{port}/health", proc)
        assert health["sources"]["vision"] == f"{ONNX_COMMUNITY}/onnx/vision_encoder.onnx (downloaded)"
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=10).text
        assert page  # the UI is served
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=120, json={
            "model": "fastvlm", "max_tokens": 8, "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is it?"},
                {"type": "image_url", "image_url": {"url": _data_url()}}]}]})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]
    finally:
        proc.terminate()
        console = proc.communicate(timeout=30)[0]
        hub.stop()
    assert "downloading" in console


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 180) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            info = httpx.get(url, timeout=5).json()["engine"]
            if info.get("state", "ready") == "ready" and info.get("sources"):
                return info
            assert info.get("state") != "failed", info
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError("the app did not become ready")


def _data_url() -> str:
    import base64
    import io

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 200, 30)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def test_cache_files_are_reused_not_copied(published, photo, tmp_path):
    """The cache holds each downloaded file once (huggingface_hub's blobs + snapshot links)."""
    hub = hub_with(published, ONNX_COMMUNITY, GGUF_NEW)
    try:
        assert predict(env_for(hub.url, tmp_path / "hf"), photo).returncode == 0
    finally:
        hub.stop()
    blobs = list((tmp_path / "hf" / "hub").glob("models--*/blobs/*"))
    assert len(blobs) == 3 and not list((tmp_path / "hf" / "hub").glob("**/*.incomplete"))
    shutil.rmtree(tmp_path / "hf")


# -- the official checkpoint ------------------------------------------------------------------------------
NO_TORCH = ("import pathlib; pathlib.Path(__file__).parents[1].joinpath('imported').write_text(__name__)\n"
            "raise ImportError(__name__ + ' must not be imported by the app or the conversion')\n")


@pytest.fixture
def no_torch(tmp_path) -> str:
    """A PYTHONPATH entry whose torch/timm/transformers fail to import: the child process proves it never needs them."""
    for name in ("torch", "timm", "transformers"):
        (tmp_path / "poison" / name).mkdir(parents=True)
        (tmp_path / "poison" / name / "__init__.py").write_text(NO_TORCH)
    return str(tmp_path / "poison")


def test_no_flags_fetch_apples_checkpoint_and_convert_it_once_without_torch(apple_checkpoint, photo, tmp_path,
                                                                          no_torch):
    hub = FakeHub()
    for f in apple_checkpoint.iterdir():
        hub.add("apple/FastVLM-0.5B", f.name, f)
    hub.start()
    env = env_for(hub.url, tmp_path / "hf", PYTHONPATH=no_torch)
    try:
        first = predict(env, photo, "--resolution", "512")
        assert first.returncode == 0, first.stderr
        out = json.loads(first.stdout)
        assert out["answer"] and out["image_tokens"] == 64
        assert out["sources"]["llm"].startswith("apple/FastVLM-0.5B@") and "(converted now)" in out["sources"]["llm"]
        for stage in ("downloading apple/FastVLM-0.5B", "converting vision", "writing language model"):
            assert stage in first.stderr
        second = predict({**env, "HF_HUB_OFFLINE": "1"}, photo, "--resolution", "512")
        assert second.returncode == 0, second.stderr
        assert "(cache)" in json.loads(second.stdout)["sources"]["llm"] and "converting" not in second.stderr
        assert json.loads(second.stdout)["answer"] == out["answer"]
    finally:
        hub.stop()
    assert not (Path(no_torch) / "imported").exists(), "the run imported " + (Path(no_torch) / "imported").read_text()
    converted = list((tmp_path / "hf" / "fastvlm" / "converted").glob("*/*"))
    assert len(converted) == 1 and not any(".tmp" in p.name for p in converted)


def test_an_unconvertible_official_repo_is_an_error_not_the_prebuilt_files(published, photo, tmp_path):
    """Fetched but not convertible (here: a broken config.json): the error names it; the third party's Q4_K_M
    never stands in silently (it does only when the official repo cannot be fetched)."""
    hub = hub_with(published, ONNX_COMMUNITY, GGUF_NEW)
    hub.add("apple/FastVLM-0.5B", "config.json", b"{not json")
    hub.add("apple/FastVLM-0.5B", "model.safetensors", b"\0" * 16)
    try:
        run = predict(env_for(hub.url, tmp_path / "hf"), photo)
        exact = predict(env_for(hub.url, tmp_path / "hf"), photo, "--exact")
    finally:
        hub.stop()
    for done in (run, exact):
        assert done.returncode == 2 and "apple/FastVLM-0.5B could not be converted" in done.stderr, done.stderr
        assert "using the prebuilt files" not in done.stderr and "Traceback" not in done.stderr
    assert not list((tmp_path / "hf" / "hub").glob(f"models--{GGUF_NEW.replace('/', '--')}"))  # nothing fetched
