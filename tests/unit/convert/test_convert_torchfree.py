"""Torch-free converter pieces: the numpy safetensors reader (bf16), quant names, slow-tokenizer files (Apple's keys:
test_apple_manifest)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fastvlm.convert import safetensors_np as st
from fastvlm.convert.text_gguf import resolve_quant


def test_bf16_round_trip_is_exact_and_rounds_to_nearest_even(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-3, 65536.0, 0.0], np.float32)
    bits = st.f32_to_bf16(values)
    back = st.bf16_to_f32(bits)
    assert np.array_equal(back[[0, 1, 2, 4, 5]], values[[0, 1, 2, 4, 5]])  # bf16 values come back exactly
    assert back[3] != values[3] and abs(back[3] - values[3]) <= 2**-8 * values[3]  # 1e-3 is rounded
    # 1 + 2^-8 lies halfway between two bf16 values: ties go to the even one (1.0); just above goes up
    halfway = np.array([1 + 2**-8, 1 + 2**-8 + 2**-20], np.float32)
    assert st.bf16_to_f32(st.f32_to_bf16(halfway)).tolist() == [1.0, 1 + 2**-7]
    path = tmp_path / "m.safetensors"
    st.write(path, {"w": ("BF16", bits.reshape(2, 3)), "n": ("I64", np.arange(3)), "f": ("F32", values)})
    header = st.read_header(path)
    assert [k for k in header] == ["w", "n", "f"] and header["w"].shape == (2, 3)
    assert np.array_equal(st.load(header["w"]), bits.reshape(2, 3))
    assert np.array_equal(st.load_f32(header["w"]).ravel(), st.bf16_to_f32(bits))
    assert st.load(header["n"]).tolist() == [0, 1, 2] and np.array_equal(st.load_f32(header["f"]), values)


def test_a_file_that_is_not_safetensors_is_named(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\xff" * 16)
    with pytest.raises(st.SafetensorsError, match="bad.safetensors"):
        st.read_header(bad)


@pytest.mark.parametrize("quant, native, want", [
    ("auto", True, "bf16"), ("auto", False, "q8_0"), ("IQ4_NL", False, "iq4_nl"), ("Q4_K_M", True, "q4_k_m"),
    ("Q4_0", True, "q4_0"), ("f32", True, "f32"),
])
def test_quant_names(quant, native, want):
    assert resolve_quant(quant, bf16_native=native) == want


def test_an_unknown_quant_lists_the_choices():
    with pytest.raises(ValueError, match="auto, bf16, q8_0, q4_0, iq4_nl, q4_k_m, f16, f32"):
        resolve_quant("q2_k")


def slow_tokenizer_files(folder, vocab: dict | None = None, added: dict | None = None) -> None:
    """Apple's tokenizer files: vocab.json + merges.txt + added_tokens.json, no tokenizer.json (by default a
    three-token vocabulary, one merge, and Qwen2's three specials after it)."""
    vocab = {"a": 0, "b": 1, "ab": 2} if vocab is None else vocab
    added = {"<|endoftext|>": 3, "<|im_start|>": 4, "<|im_end|>": 5} if added is None else added
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\na b\n")
    (folder / "added_tokens.json").write_text(json.dumps(added))


def test_slow_tokenizer_files_with_added_tokens_json_only(tmp_path):
    """Apple's files: vocab.json + merges.txt + added_tokens.json; no tokenizer.json, no added_tokens_decoder."""
    from fastvlm.convert.qwen2_gguf import CONTROL, NORMAL, UNUSED
    from fastvlm.convert.vocab import read_vocab

    slow_tokenizer_files(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    v = read_vocab(tmp_path, 8)
    assert v.tokens[:6] == ("a", "b", "ab", "<|endoftext|>", "<|im_start|>", "<|im_end|>")
    assert v.types == (NORMAL,) * 3 + (CONTROL,) * 3 + (UNUSED,) * 2
    assert (v.endoftext, v.im_start, v.im_end) == (3, 4, 5) and v.merges == ("a b",)


def test_added_tokens_json_types_each_token_as_llama_cpp_reads_it(tmp_path):
    """Special (named in special_tokens_map.json, or `<|...|>`) -> CONTROL, which user text never matches; any
    other added token (`<image>`) -> USER_DEFINED; the values are gguf's own, not this module's copies."""
    import gguf

    from fastvlm.convert.vocab import read_vocab

    added = {"<|endoftext|>": 2, "<|im_start|>": 3, "<|im_end|>": 4, "<image>": 5, "<named>": 6, "half|>": 7}
    slow_tokenizer_files(tmp_path, {"a": 0, "b": 1}, added)
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({
        "eos_token": "<|endoftext|>", "additional_special_tokens": [{"content": "<named>", "lstrip": False}]}))
    types = dict(zip(read_vocab(tmp_path, 8).tokens, read_vocab(tmp_path, 8).types))
    control, user = gguf.TokenType.CONTROL, gguf.TokenType.USER_DEFINED
    assert [types[t] for t in added] == [control, control, control, user, control, user]


def test_slow_tokenizer_files_need_both_vocab_and_merges(tmp_path):
    from fastvlm.convert.vocab import read_vocab

    (tmp_path / "vocab.json").write_text(json.dumps({"a": 0}))
    with pytest.raises(FileNotFoundError, match=r"vocab.json \+ merges.txt"):
        read_vocab(tmp_path, 4)


def test_the_chat_template_comes_from_the_checkpoint_else_chatml(tmp_path):
    from fastvlm.convert.qwen2_gguf import CHAT_TEMPLATE
    from fastvlm.convert.vocab import read_chat_template

    assert read_chat_template(tmp_path) == CHAT_TEMPLATE
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ from_config }}"}))
    assert read_chat_template(tmp_path) == "{{ from_config }}"
    (tmp_path / "chat_template.jinja").write_text("{{ from_jinja }}")
    assert read_chat_template(tmp_path) == "{{ from_jinja }}"  # the file wins, as transformers reads it
