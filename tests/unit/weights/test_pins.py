"""Third-party weight files pinned (issue #19, finding 4): the first fetch records revision and sha256, later uses
check them and refuse a changed file until it is re-pinned; external-data names read from a downloaded graph are
plain file names (never '..', a folder or an absolute path)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fastvlm.engine.events import ModelFileError
from fastvlm.weights import Hub
from fastvlm.weights.pins import PinMismatch, sha256_of
from fastvlm.weights.sources import Candidate


def cache_file(cache: Path, repo: str, path: str, content: bytes, commit: str = "a" * 40) -> Path:
    """A file as huggingface_hub's cache holds it (refs/main -> snapshots/<commit>/<path>)."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    file = folder / "snapshots" / commit / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(content)
    return file


def test_the_first_fetch_is_pinned_and_a_changed_file_is_refused_until_re_pinned(tmp_path):
    hub, c = Hub(cache_dir=tmp_path / "hub"), Candidate("someone/exports", "llm.gguf")
    file = cache_file(tmp_path / "hub", c.repo, c.path, b"GGUF first")
    assert hub.cached(c) == file
    pin = hub.pins.entries()[str(c)]
    assert pin["revision"] == "a" * 40 and pin["sha256"] == sha256_of(file)
    file.write_bytes(b"GGUF other")  # changed under the same name
    with pytest.raises(PinMismatch, match="not the file that was pinned.*re-pin it.*pins.json"):
        hub.cached(c)
    with pytest.raises(PinMismatch):  # and again: nothing was re-recorded
        hub.cached(c)
    hub.pins.path.unlink()  # the user re-pins
    assert hub.cached(c) == file and hub.pins.entries()[str(c)]["sha256"] == sha256_of(file)


def test_a_candidate_may_carry_its_own_hash_and_revision(tmp_path):
    cache_file(tmp_path / "hub", "someone/exports", "llm.gguf", b"GGUF old", commit="b" * 40)
    cache_file(tmp_path / "hub", "someone/exports", "llm.gguf", b"GGUF new", commit="c" * 40)  # refs/main -> c
    hub = Hub(cache_dir=tmp_path / "hub")
    old = Candidate("someone/exports", "llm.gguf", revision="b" * 40)
    assert hub.cached(old).read_bytes() == b"GGUF old"
    wrong = Candidate("someone/exports", "llm.gguf", sha256="0" * 64)
    with pytest.raises(PinMismatch, match="sources.py"):
        hub.cached(wrong)


def test_a_lookup_asks_the_cache_for_the_pinned_revision_after_upstream_moved(tmp_path):
    hub, c = Hub(cache_dir=tmp_path / "hub"), Candidate("someone/exports", "llm.gguf")
    first = cache_file(tmp_path / "hub", c.repo, c.path, b"GGUF first", commit="b" * 40)
    assert hub.cached(c) == first
    cache_file(tmp_path / "hub", c.repo, c.path, b"GGUF newer", commit="c" * 40)  # refs/main moves to c
    assert hub.cached(c) == first  # the pinned commit, not a PinMismatch on the newest


def test_a_download_asks_for_the_pinned_revision_and_is_checked_against_its_pin(tmp_path, monkeypatch):
    import huggingface_hub as hf

    cache = tmp_path / "hub"
    hub, c = Hub(cache_dir=cache), Candidate("someone/exports", "llm.gguf")
    first = cache_file(cache, c.repo, c.path, b"GGUF first", commit="b" * 40)
    files, asked = {None: first, "b" * 40: first}, []  # what the fake Hub serves per revision asked (None: main)
    monkeypatch.setattr(Hub, "is_offline", False)
    monkeypatch.setattr(hf, "hf_hub_download", lambda repo, path, revision=None, **kw: asked.append(revision)
                        or str(files[revision]))
    assert hub.download(c) == first  # pinned at b
    files[None] = cache_file(cache, c.repo, c.path, b"GGUF newer", commit="c" * 40)  # upstream moved on
    assert hub.download(c) == first and asked == [None, "b" * 40]
    first.write_bytes(b"GGUF changed")  # the pinned revision's download brings other bytes
    with pytest.raises(PinMismatch, match="not the file that was pinned"):
        hub.download(c)


@pytest.mark.parametrize("name", ["../escaped.bin", "/tmp/absolute.bin", "sub/dir.bin"])
def test_external_data_names_must_be_plain_file_names(tmp_path, name):
    onnx = pytest.importorskip("onnx")
    resolve_module = importlib.import_module("fastvlm.weights.resolve")  # the package re-exports a function
    tensor = onnx.helper.make_tensor("w", onnx.TensorProto.FLOAT, [1], [0.0])
    tensor.ClearField("float_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=name)
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["w"], ["y"])], "g", [],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])], [tensor])
    path = tmp_path / "vision.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    asked = []

    class NoHub:
        own_dir = tmp_path / "own"

        def cached(self, c):
            asked.append(c)
            return None

        download = cached

    with pytest.raises(ModelFileError, match="only a plain file name"):
        resolve_module._complete(path, Candidate("someone/exports", "onnx/vision.onnx"), NoHub(), fetch=True)
    assert asked == [] and not (tmp_path / "own").exists()  # nothing fetched, nothing written


def test_doctor_and_later_runs_refuse_a_pinned_file_that_changed(tmp_path, tiny_models):
    """`doctor` on the prebuilt files in the cache: the first run pins them, a changed byte is then refused."""
    hub = tmp_path / "hf" / "hub"
    cache_file(hub, "onnx-community/FastVLM-0.5B-ONNX", "onnx/vision_encoder.onnx", tiny_models.vision.read_bytes())
    llm = cache_file(hub, "musk12/apple-fastvlm-cpu-inference-models", "fastvlm_qwen2_Q4_K_M.gguf",
                     tiny_models.llm.read_bytes())
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}

    def doctor():
        return subprocess.run([sys.executable, "-m", "fastvlm", "doctor", "--source", "prebuilt", "--no-download",
                               "--facts-only"], env=env, capture_output=True, text=True, timeout=300)

    first = doctor()
    assert first.returncode == 0, first.stdout[-2000:]
    data = bytearray(llm.read_bytes())
    data[-1] ^= 1
    llm.write_bytes(bytes(data))
    changed = doctor()
    assert changed.returncode == 1
    assert "fastvlm_qwen2_Q4_K_M.gguf is not the file that was pinned" in changed.stdout
    assert "re-pin it: delete its entry in" in changed.stdout and "connect to the internet" not in changed.stdout


def test_the_weights_file_beside_a_pinned_graph_is_checked_against_its_pin_too(tmp_path):
    """onnx-community's vision graph keeps all its weights in vision_encoder.onnx_data: changed on this disk, it
    must be refused as the graph itself is (it was used silently once it sat beside the graph)."""
    onnx = pytest.importorskip("onnx")
    from fastvlm.weights.pins import PinMismatch
    from fastvlm.weights.resolve import _first
    from fastvlm.weights.sources import Candidate

    weights = onnx.helper.make_tensor("w", onnx.TensorProto.FLOAT, [1], [0.0])
    weights.ClearField("float_data")
    weights.data_location = onnx.TensorProto.EXTERNAL
    weights.external_data.add(key="location", value="vision_encoder.onnx_data")
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["w"], ["y"])], "g", [],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])], [weights])
    repo, cache = "onnx-community/FastVLM-0.5B-ONNX", tmp_path / "hf" / "hub"
    graph_file = cache_file(cache, repo, "onnx/vision_encoder.onnx", onnx.helper.make_model(graph).SerializeToString())
    data_file = cache_file(cache, repo, "onnx/vision_encoder.onnx_data", b"\0\0\0\0")
    hub, candidate = Hub(cache_dir=cache), Candidate(repo, "onnx/vision_encoder.onnx")
    assert _first((candidate,), hub, fetch=False)[0] == graph_file
    assert f"{repo}/onnx/vision_encoder.onnx_data" in hub.pins.entries()  # pinned on first use, as a download is
    data_file.write_bytes(b"\xff\xff\xff\xff")  # changed on this disk
    with pytest.raises(PinMismatch, match="vision_encoder.onnx_data"):
        _first((candidate,), hub, fetch=False)
