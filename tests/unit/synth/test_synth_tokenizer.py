"""The synthetic models' tokenizer: GPT-2's byte map, Qwen2's ids for the specials and `<image>`, what it writes."""

from __future__ import annotations

import json

import pytest
import tokenizers as tk
import transformers

from fastvlm.convert.qwen2_gguf import CONTROL, ENDOFTEXT, IM_END, IM_START, NORMAL, QWEN2_SPECIAL_BASE, UNUSED
from fastvlm.convert.vocab import IMAGE_TOKEN
from fastvlm.synth import tokenizer as synth_tokenizer
from fastvlm.synth.tokenizer import CORPUS, build_vocab, bytes_to_unicode, synth_vocab_with_image, train_bpe

QWEN2_ROWS = 151936  # Qwen2-0.5B's embedding rows
FASTVLM_IMAGE_ID = 151646  # `image_token_index` in Apple's config


def utf8_samples() -> str:
    """Characters whose UTF-8 holds every byte valid UTF-8 can hold (all but C0, C1, F5-FF)."""
    four_bytes = [0x10000, 0x40000, 0x80000, 0xC0000, 0x100000]  # lead bytes F0-F4
    return "".join(map(chr, [*range(0x800), *range(0x1000, 0x10000, 0x1000), 0x800, *four_bytes]))


def test_every_byte_has_its_own_character():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert sorted(table.values()) == sorted(tk.pre_tokenizers.ByteLevel.alphabet())
    assert (table[ord(" ")], table[ord("\n")], table[ord("~")]) == ("\u0120", "\u010a", "~")  # Ġ and Ċ in Qwen2's vocab


def test_the_byte_map_is_the_one_the_tokenizers_library_applies():
    text = utf8_samples()
    assert set(text.encode()) == set(range(256)) - {0xC0, 0xC1, *range(0xF5, 0x100)}
    byte_level = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    table = bytes_to_unicode()
    for char in text:
        assert byte_level.pre_tokenize_str(char)[0][0] == "".join(table[b] for b in char.encode()), hex(ord(char))


def test_bpe_learns_the_merges_asked_for_most_frequent_first():
    merges = train_bpe(CORPUS, 10)
    assert len(merges) == 10 and train_bpe(CORPUS, 20)[:10] == merges
    assert train_bpe("ab ab", 5) == [("a", "b")]  # then (Ġ, ab) is seen once: below min_count


def test_qwen2_sized_vocabularies_put_the_specials_at_qwen2s_ids():
    v = build_vocab(vocab_size=QWEN2_SPECIAL_BASE + 3)  # the smallest that holds them
    learned = len(build_vocab().tokens) - 3
    assert len(v.tokens) == len(v.types) == QWEN2_SPECIAL_BASE + 3
    assert (v.endoftext, v.im_start, v.im_end) == (151643, 151644, 151645)
    assert v.tokens[-3:] == (ENDOFTEXT, IM_START, IM_END) and v.types[-3:] == (CONTROL,) * 3
    assert v.tokens[learned] == f"\u0120w{learned}" and v.tokens[151642] == "\u0120w151642"  # the gap: " w<N>"
    assert set(v.types[:-3]) == {NORMAL}
    with pytest.raises(ValueError, match="no room for Qwen2's special ids"):
        build_vocab(vocab_size=QWEN2_SPECIAL_BASE + 2)


def test_the_specials_may_follow_the_learned_tokens_directly(monkeypatch):
    learned = len(build_vocab().tokens) - 3
    monkeypatch.setattr(synth_tokenizer, "QWEN2_SPECIAL_BASE", learned)
    v = build_vocab(vocab_size=learned + 5)
    assert v.endoftext == learned and v.tokens[-2:] == (f"[PAD{learned + 3}]", f"[PAD{learned + 4}]")
    assert v.types[-2:] == (UNUSED, UNUSED)
    monkeypatch.setattr(synth_tokenizer, "QWEN2_SPECIAL_BASE", learned - 1)
    with pytest.raises(ValueError, match="no room"):
        build_vocab(vocab_size=learned + 5)


def test_image_takes_the_first_unused_row_as_in_fastvlm():
    v, image_id = synth_vocab_with_image(QWEN2_ROWS)
    assert image_id == FASTVLM_IMAGE_ID
    assert len(v.tokens) == len(v.types) == QWEN2_ROWS
    assert v.tokens[151645:151648] == (IM_END, IMAGE_TOKEN, "[PAD151647]")
    assert v.types[151645:151648] == (CONTROL, CONTROL, UNUSED) and v.types[-1] == UNUSED


def test_without_a_size_image_follows_the_specials():
    base = build_vocab()
    v, image_id = synth_vocab_with_image()
    assert image_id == len(base.tokens) and v.tokens == (*base.tokens, IMAGE_TOKEN)
    assert v.types == (*base.types, CONTROL) and len(base.types) == len(base.tokens)


def test_the_written_specials_are_special_and_matched_as_written(tmp_path):
    vocab, image_id = synth_vocab_with_image()
    synth_tokenizer.write_tokenizer(vocab, tmp_path)
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    ids = tok.encode("<|im_start|>user\n<image>\nhi<|im_end|>", add_special_tokens=False)
    assert ids[0] == vocab.im_start and image_id in ids and ids[-1] == vocab.im_end
    assert tok.decode(ids, skip_special_tokens=True) == "user\n\nhi"
    added = json.loads((tmp_path / "tokenizer.json").read_text())["added_tokens"]
    assert [(t["content"], t["special"], t["normalized"]) for t in added] == [  # as Qwen2's tokenizer.json has them
        (t, True, False) for t in (ENDOFTEXT, IM_START, IM_END, IMAGE_TOKEN)]
