"""The official checkpoint's conversion cache: its key covers everything that shapes the two files, and two
processes converting the same checkpoint at once do the work once and never delete each other's result."""

from __future__ import annotations

import importlib.metadata
import inspect
import threading
import time
from pathlib import Path

from fastvlm.convert import quantize, qwen2_gguf
from fastvlm.weights import official


def test_the_key_covers_the_gguf_metadata_template_quantization_and_manifests():
    sources = set(official.converter_sources())
    for thing in (qwen2_gguf.add_qwen2_metadata, quantize.quantize_gguf):  # eos, chat template, llama.cpp types
        assert Path(inspect.getsourcefile(thing)).resolve() in sources
    assert {p.name for p in sources} >= {"apple-FastVLM-0.5B.json", "build.py", "text_gguf.py", "vision_graph.py"}


def test_another_gguf_or_llama_cpp_version_converts_again(monkeypatch):
    before = official.converter_version()
    real = importlib.metadata.version
    for package in ("gguf", "llama-cpp-python"):
        monkeypatch.setattr(importlib.metadata, "version", lambda name, p=package: "0.0.0" if name == p else real(name))
        assert official.converter_version() != before, package
    monkeypatch.setattr(importlib.metadata, "version", real)
    assert official.converter_version() == before


def test_two_conversions_at_once_convert_once_and_keep_the_result(monkeypatch, tmp_path):
    runs = []

    def convert_checkpoint(snapshot, out, quant, threads=None, progress=None):
        runs.append(out)
        time.sleep(0.3)
        out.mkdir(parents=True)
        (out / "vision.onnx").write_bytes(b"onnx")
        (out / "llm.gguf").write_bytes(b"GGUF")

    monkeypatch.setattr("fastvlm.convert.build.convert_checkpoint", convert_checkpoint)
    out, said = tmp_path / "converted" / "x", []
    snapshot = tmp_path / "hub" / "models--apple--x" / "snapshots" / "abc"
    workers = [threading.Thread(target=official._convert, args=(snapshot, out, "f32", 1, said.append))
               for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert len(runs) == 1 and (out / official.DONE).is_file() and (out / "llm.gguf").read_bytes() == b"GGUF"
    assert any(s.startswith("waiting for another conversion") for s in said)
    assert not [p for p in out.parent.iterdir() if ".tmp" in p.name]


def test_a_checkpoint_only_partly_in_the_cache_is_fetched_whole(tmp_path):
    """Another tool left only config.json of the checkpoint in the cache (transformers' AutoConfig, `hf download
    REPO config.json`), or a first download was stopped: the rest is fetched, not the part taken for the whole."""
    import huggingface_hub as hf

    from fastvlm.weights import Hub
    from tests.fakehub import FakeHub

    repo, fake = "apple/FastVLM-0.5B", FakeHub()
    fake.add(repo, "config.json", b'{"model_type": "llava_qwen2"}')
    fake.add(repo, "model.safetensors", b"\0" * 64)
    fake.start()
    try:
        cache = tmp_path / "hf" / "hub"
        hf.hf_hub_download(repo, "config.json", cache_dir=cache, endpoint=fake.url)
        snapshot = official._snapshot(repo, Hub(endpoint=fake.url, cache_dir=cache), download=True)
        assert (snapshot / "model.safetensors").read_bytes() == b"\0" * 64  # was ModelFileError "not a FastVLM
        # checkpoint", with nothing requested
        fake.requests.clear()
        assert official._snapshot(repo, Hub(endpoint=fake.url, cache_dir=cache), download=True) == snapshot
        assert fake.file_requests() == []  # whole in the cache: nothing asked of the Hub
    finally:
        fake.stop()


def test_a_snapshot_is_whole_with_its_config_and_every_shard_its_index_names(tmp_path):
    import json

    def snapshot(files: dict[str, str]) -> Path:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)
        return folder

    index = json.dumps({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})
    assert official._complete(snapshot({"config.json": "{}", "model.safetensors": ""}))
    assert not official._complete(snapshot({"config.json": "{}"}))
    assert not official._complete(snapshot({"model.safetensors": ""}))  # no config
    assert not official._complete(snapshot({"config.json": "{}", "model.safetensors.index.json": index,
                                            "model-1.safetensors": ""}))  # a stopped download: one shard of two
    assert official._complete(snapshot({"config.json": "{}", "model.safetensors.index.json": index,
                                        "model-1.safetensors": "", "model-2.safetensors": ""}))
    assert not official._complete(snapshot({"config.json": "{}", "model-1.safetensors": "",
                                            "model.safetensors.index.json": json.dumps({"weight_map": {}})}))
