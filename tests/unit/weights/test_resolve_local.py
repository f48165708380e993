"""fastvlm.weights.resolve with files on this disk: paths given, a folder; neither asks the Hub nor converts,
and a file that cannot be a model is refused before anything loads it."""

from __future__ import annotations

import importlib

import pytest

from fastvlm.engine.events import ModelFileError
from fastvlm.weights import resolve

resolve_module = importlib.import_module("fastvlm.weights.resolve")  # the package re-exports the function


class NoHub:
    """A Hub that fails the test when asked for anything."""

    report = None

    def __getattr__(self, name):
        pytest.fail(f"the Hub was asked for {name}")


@pytest.fixture(autouse=True)
def no_conversion(monkeypatch):
    monkeypatch.setattr(resolve_module.official, "converted", lambda *a: pytest.fail("the checkpoint was converted"))


def model_files(folder, vision: str = "vision.onnx", llm: str = "llm.gguf", vision_bytes: int = 64):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / vision).write_bytes(b"\0" * vision_bytes)
    (folder / llm).write_bytes(b"GGUF" + b"\0" * 60)
    return folder / vision, folder / llm


def test_paths_given_are_used_as_they_are(tmp_path):
    vision, llm = model_files(tmp_path / "given", "my-vision.onnx", "my-llm.gguf")
    paths = resolve(vision=vision, llm=llm, hub=NoHub())
    assert (paths.vision, paths.llm) == (vision, llm)
    assert paths.sources == {"vision": "my-vision.onnx (given)", "llm": "my-llm.gguf (given)"}


def test_a_path_given_that_does_not_exist_is_named_with_its_flag(tmp_path):
    vision, _ = model_files(tmp_path)
    with pytest.raises(ModelFileError, match=r"llm file .*nowhere\.gguf does not exist \(given by --llm PATH"):
        resolve(vision=vision, llm=tmp_path / "nowhere.gguf", hub=NoHub(), download=False)


def test_a_folder_is_used_without_asking_for_the_official_checkpoint(tmp_path):
    vision, llm = model_files(tmp_path / "models")
    paths = resolve(models_dir=tmp_path / "models", hub=NoHub())
    assert (paths.vision, paths.llm) == (vision, llm)
    assert paths.sources == {"vision": "vision.onnx (local folder)", "llm": "llm.gguf (local folder)"}


def test_a_folder_may_hold_the_published_files_under_their_own_names(tmp_path):
    vision, llm = model_files(tmp_path / "models", "vision_encoder.onnx", "fastvlm_qwen2_Q4_K_M.gguf")
    paths = resolve(models_dir=tmp_path / "models", hub=NoHub())
    assert (paths.vision, paths.llm) == (vision, llm)


@pytest.mark.parametrize("vision_bytes, ok", [(64, True), (63, False)])
def test_a_vision_file_too_small_to_be_a_graph_is_refused(tmp_path, vision_bytes, ok):
    vision, llm = model_files(tmp_path, vision_bytes=vision_bytes)
    if ok:
        assert resolve(vision=vision, llm=llm, hub=NoHub()).vision == vision
    else:
        with pytest.raises(ModelFileError, match="too small to be an ONNX model"):
            resolve(vision=vision, llm=llm, hub=NoHub())


def test_a_language_model_that_is_not_a_gguf_is_refused(tmp_path):
    vision, llm = model_files(tmp_path)
    llm.write_bytes(b"GGML" + b"\0" * 60)
    with pytest.raises(ModelFileError, match="not a GGUF file"):
        resolve(vision=vision, llm=llm, hub=NoHub())


class CacheOnly:
    """A Hub whose cache is empty and which fails the test when asked to download."""

    report = None

    def __init__(self, tmp_path):
        self.own_dir, self.looked = tmp_path / "own", []

    def cached(self, c):
        self.looked.append(str(c))
        return None

    def download(self, c):
        pytest.fail(f"{c} was downloaded")


@pytest.mark.parametrize("download, look_only", [(False, False), (True, True), (False, True)])
def test_no_download_and_look_only_look_in_the_cache_and_fetch_nothing(tmp_path, download, look_only):
    hub = CacheOnly(tmp_path)
    with pytest.raises(ModelFileError, match="none of .* is in the Hugging Face cache") as e:
        resolve(source="prebuilt", hub=hub, download=download, look_only=look_only)
    assert "onnx-community/FastVLM-0.5B-ONNX/onnx/vision_encoder.onnx" in hub.looked
    assert "downloads are off (--no-download)" in str(e.value)
