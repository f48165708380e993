"""The synthetic models: reproducible bytes, a real tokenizer llama.cpp accepts, the vision contract."""

from __future__ import annotations

import argparse

import numpy as np
import onnxruntime as ort
import pytest

from fastvlm.engine.llamalib import import_llama
from fastvlm.synth import models as synth
from fastvlm.synth.tokenizer import build_vocab, encode

ENGLISH = "The dog is sitting on the grass in front of the white house, looking at the camera."
UNICODE = ["🐱 cat", "猫が好きです。", "naïve café ñandú", "🇯🇵👩‍👩‍👧 e\u0301", "tab\tnew\nline\r\n  spaces "]
llama_cpp = import_llama()  # with its CPU backend loaded (a portable build loads none by itself)
PROMPT = b"<|im_start|>user\nDescribe the image.<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return synth.write_models(tmp_path_factory.mktemp("tiny"), "tiny", seed=0)


@pytest.fixture(scope="module")
def llm(tiny):
    model = llama_cpp.Llama(model_path=str(tiny.llm), n_ctx=512, n_threads=2, verbose=False)
    yield model
    model.close()


@pytest.fixture(scope="module")
def vision(tiny):
    return ort.InferenceSession(str(tiny.vision), providers=["CPUExecutionProvider"])


def _features(session, height: int, width: int, seed: int = 0) -> np.ndarray:
    pixels = np.random.default_rng(seed).random((1, 3, height, width), dtype=np.float32)
    return session.run(["image_features"], {"pixel_values": pixels})[0]


def test_same_seed_same_bytes_other_seed_other_bytes(tiny, tmp_path):
    again = synth.write_models(tmp_path / "again", "tiny", seed=0)
    other = synth.write_models(tmp_path / "other", "tiny", seed=1)
    for name in ("vision", "llm"):
        first = getattr(tiny, name).read_bytes()
        assert getattr(again, name).read_bytes() == first
        assert getattr(other, name).read_bytes() != first


def test_tiny_files_are_small(tiny):
    assert tiny.vision.name == "vision.onnx" and tiny.llm.name == "llm.gguf"
    for path in (tiny.vision, tiny.llm):
        assert 0 < path.stat().st_size < 10 * 2**20


def test_unknown_shape_is_refused(tmp_path):
    with pytest.raises(ValueError, match="tiny"):
        synth.write_models(tmp_path, "7b")


def test_special_markers_are_control_tokens_only_when_asked(llm):
    vocab = build_vocab()
    marked = b"<|im_start|>user\nhi<|im_end|>"
    ids = llm.tokenize(marked, add_bos=False, special=True)
    assert ids[0] == vocab.im_start and ids[-1] == vocab.im_end
    assert llm.detokenize(ids[1:-1]) == b"user\nhi"
    plain = llm.tokenize(marked, add_bos=False, special=False)
    assert not {vocab.im_start, vocab.im_end, vocab.endoftext} & set(plain)
    assert llm.detokenize(plain) == marked
    assert llm.tokenize(b"<|endoftext|>", add_bos=False, special=True) == [vocab.endoftext]


def test_metadata_names_eos_bos_and_template(llm):
    vocab = build_vocab()
    assert llm.n_vocab() == len(vocab.tokens)
    assert llm.token_eos() == vocab.im_end
    assert llm.token_bos() == vocab.endoftext
    assert llm.metadata["tokenizer.ggml.pre"] == "qwen2"
    assert llm.metadata["tokenizer.ggml.add_bos_token"] == "false"
    assert "<|im_start|>" in llm.metadata["tokenizer.chat_template"]


def test_english_falls_into_learned_multibyte_tokens(llm):
    ids = llm.tokenize(ENGLISH.encode(), add_bos=False, special=False)
    assert ids == encode(ENGLISH, build_vocab())  # llama.cpp applies our merges as we meant them
    assert len(ids) < len(ENGLISH) / 3
    assert b" dog" in [llm.detokenize([i]) for i in ids]


@pytest.mark.parametrize("text", UNICODE)
def test_utf8_round_trips_through_token_pieces(llm, text):
    ids = llm.tokenize(text.encode(), add_bos=False, special=False)
    assert b"".join(llm.detokenize([i]) for i in ids) == text.encode()


def test_greedy_decoding_produces_tokens(llm):
    prompt = llm.tokenize(PROMPT, add_bos=False, special=True)
    llm.reset()
    llm.eval(prompt)
    token = llm.sample(temp=0.0)
    assert 0 <= token < llm.n_vocab()
    llm.eval([token])
    assert llm.n_tokens == len(prompt) + 1


@pytest.mark.parametrize(("height", "width"), [(128, 128), (256, 256), (128, 256)])
def test_vision_output_shape(vision, height, width):
    feats = _features(vision, height, width)
    assert feats.dtype == np.float32
    assert feats.shape == (1, (height // 64) * (width // 64), synth.SHAPES["tiny"].hidden)


def test_vision_features_look_like_token_embeddings_and_depend_on_the_image(vision):
    a, b = _features(vision, 256, 256, seed=0), _features(vision, 256, 256, seed=1)
    std = synth.SHAPES["tiny"].init_std
    assert 0.5 * std < a.std() < 2 * std
    assert np.abs(a - b).mean() > 0.2 * std


def test_cli_writes_both_files(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    synth.add_arguments(parser)
    assert synth.run(parser.parse_args(["--out", str(tmp_path), "--seed", "3"])) == 0
    assert (tmp_path / "vision.onnx").is_file() and (tmp_path / "llm.gguf").is_file()
    assert "llm.gguf" in capsys.readouterr().out


@pytest.mark.slow
def test_0p5b_has_qwen2_shapes_and_ids(tmp_path):
    paths = synth.write_models(tmp_path, "0.5b", seed=0)
    assert 300 * 2**20 < paths.llm.stat().st_size < 450 * 2**20  # Q4_K_M, like the real one
    assert not list(tmp_path.glob("*.tmp"))
    model = llama_cpp.Llama(model_path=str(paths.llm), n_ctx=512, n_threads=2, verbose=False)
    try:
        assert model.n_vocab() == 151936 and model.n_embd() == 896
        ids = model.tokenize(b"<|endoftext|><|im_start|>user\nhi<|im_end|>", add_bos=False, special=True)
        assert ids[:2] == [151643, 151644] and ids[-1] == 151645
        assert model.token_eos() == 151645
        model.eval(ids)
        assert 0 <= model.sample(temp=0.0) < 151936
    finally:
        model.close()
    session = ort.InferenceSession(str(paths.vision), providers=["CPUExecutionProvider"])
    assert _features(session, 512, 512).shape == (1, 64, 896)
    assert _features(session, 1024, 1024).shape == (1, 256, 896)
