"""Converter pieces that need no torch: tensor names, the tokenizer round trip (Apple's keys: test_apple_manifest)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("gguf")
pytest.importorskip("tokenizers")

from fastvlm.convert.checkpoint import CheckpointError, transformers_name
from fastvlm.convert.qwen2_gguf import CHAT_TEMPLATE, CONTROL, NORMAL, UNUSED
from fastvlm.convert.text_gguf import gguf_name
from fastvlm.convert.vocab import IMAGE_TOKEN, USER_DEFINED, read_chat_template, read_vocab
from fastvlm.synth.tokenizer import CORPUS, encode, synth_vocab_with_image


@pytest.mark.parametrize("hf, want", [
    ("model.language_model.embed_tokens.weight", "token_embd.weight"),
    ("model.language_model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"),
    ("model.language_model.layers.1.self_attn.k_proj.bias", "blk.1.attn_k.bias"),
    ("model.language_model.layers.1.self_attn.o_proj.weight", "blk.1.attn_output.weight"),
    ("model.language_model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight"),
    ("model.language_model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"),
    ("model.language_model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"),
    ("model.language_model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight"),
    ("model.language_model.norm.weight", "output_norm.weight"),
    ("lm_head.weight", "output.weight"),
])
def test_text_tensors_get_gguf_qwen2_names(hf, want):
    assert gguf_name(hf, n_layers=2) == want


def test_a_tensor_qwen2_does_not_have_is_refused():
    with pytest.raises(CheckpointError, match="not a Qwen2"):
        gguf_name("model.language_model.layers.0.self_attn.rotary.inv_freq_x", n_layers=2)


@pytest.mark.parametrize("old, new", [
    ("language_model.model.layers.3.mlp.up_proj.weight", "model.language_model.layers.3.mlp.up_proj.weight"),
    ("language_model.lm_head.weight", "lm_head.weight"),
    ("vision_tower.timm_model.stem.0.reparam_conv.weight", "model.vision_tower.timm_model.stem.0.reparam_conv.weight"),
    ("multi_modal_projector.linear_1.bias", "model.multi_modal_projector.linear_1.bias"),
    ("model.language_model.norm.weight", "model.language_model.norm.weight"),
])
def test_older_transformers_names_are_renamed(old, new):
    assert transformers_name(old) == new


def test_tokenizer_json_round_trip(tmp_path):
    from fastvlm.synth.tokenizer import write_tokenizer

    vocab, image_id = synth_vocab_with_image()
    write_tokenizer(vocab, tmp_path)
    rows = len(vocab.tokens) + 19
    got = read_vocab(tmp_path, rows)
    assert got.tokens[: len(vocab.tokens)] == vocab.tokens
    assert got.merges == vocab.merges
    assert (got.endoftext, got.im_start, got.im_end) == (vocab.endoftext, vocab.im_start, vocab.im_end)
    assert got.tokens[image_id] == IMAGE_TOKEN and got.types[image_id] == CONTROL
    assert got.types[vocab.im_end] == CONTROL and got.types[0] == NORMAL
    assert got.tokens[-1] == f"[PAD{rows - 1}]" and got.types[-1] == UNUSED
    assert read_chat_template(tmp_path) == CHAT_TEMPLATE


def test_the_written_tokenizer_matches_the_reference_bpe(tmp_path):
    from transformers import AutoTokenizer

    from fastvlm.synth.tokenizer import write_tokenizer

    vocab, image_id = synth_vocab_with_image()
    write_tokenizer(vocab, tmp_path)
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    text = CORPUS[:600]
    assert tok.encode(text, add_special_tokens=False) == encode(text, vocab)
    assert tok.encode("<|im_start|>user\n<image>", add_special_tokens=False)[:1] == [vocab.im_start]
    assert tok.encode("<image>", add_special_tokens=False) == [image_id]


def test_read_vocab_refuses_what_it_cannot_convert(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        read_vocab(tmp_path, 10)
    data = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
            "added_tokens": [{"id": 2, "content": "<|endoftext|>", "special": True},
                             {"id": 3, "content": "<extra>", "special": False}]}
    (tmp_path / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="im_start"):
        read_vocab(tmp_path, 8)
    with pytest.raises(ValueError, match="only 3 rows"):
        read_vocab(tmp_path, 3)
    data["added_tokens"] += [{"id": 4, "content": "<|im_start|>", "special": True},
                             {"id": 5, "content": "<|im_end|>", "special": True}]
    (tmp_path / "tokenizer.json").write_text(json.dumps(data))
    v = read_vocab(tmp_path, 8)
    assert v.types[3] == USER_DEFINED and v.im_end == 5 and v.tokens[7] == "[PAD7]"


def test_slow_tokenizer_files_are_read_too(tmp_path):
    """LLaVA-style repos (Apple's) ship vocab.json + merges.txt + tokenizer_config.json, no tokenizer.json."""
    from fastvlm.synth.tokenizer import write_tokenizer

    vocab, image_id = synth_vocab_with_image()
    write_tokenizer(vocab, tmp_path / "fast")
    data = json.loads((tmp_path / "fast" / "tokenizer.json").read_text())
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "vocab.json").write_text(json.dumps(data["model"]["vocab"]))
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    (slow / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    added = {str(t["id"]): {"content": t["content"], "special": t["special"]} for t in data["added_tokens"]}
    (slow / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": added}))
    assert read_vocab(slow, 600) == read_vocab(tmp_path / "fast", 600)
