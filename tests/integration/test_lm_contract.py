"""`LlamaLM` against llama.cpp itself on the tiny model: the context's edges, the trained length, the model's name,
token pieces, the repeat penalty's first tokens, which positions pay for logits, a restored KV snapshot, and a
close that frees once.

Where llama.cpp's own answer has to differ from the tiny model's (a GGUF with no name, a longer piece), its
functions are wrapped by `test_lm_limits.Patched`, one function changed and the rest passed through."""

from __future__ import annotations

import ctypes
from dataclasses import replace

import numpy as np
import pytest

from fastvlm import GenerationOptions, Request
from fastvlm.engine import lm as lm_module
from fastvlm.engine.engine import Engine
from fastvlm.engine.kv import Tokens
from fastvlm.engine.lm import LlamaLM
from tests.integration.test_lm_interrupt import fresh_answer
from tests.integration.test_lm_limits import Patched


@pytest.fixture
def lm(tiny_config):
    model = LlamaLM.load(tiny_config)
    yield model
    model.close()


def words(lm: LlamaLM, n: int) -> Tokens:
    ids = lm.tokenize(" cat" * n, special=False)  # " c", "at": two tokens a word
    assert len(ids) >= n
    return Tokens(tuple(ids[:n]))


def test_a_prompt_may_fill_the_context_and_the_answer_ends_at_its_edge(lm):
    with pytest.raises(ValueError, match=rf"prompt of {lm.n_ctx + 1} positions exceeds the context of {lm.n_ctx}"):
        lm.prefill([words(lm, lm.n_ctx + 1)])
    lm.prefill([words(lm, lm.n_ctx - 2)])
    assert len(list(lm.generate(GenerationOptions()))) == 3  # after n-2, n-1 and n positions; none held past n
    lm.prefill([words(lm, lm.n_ctx)])
    assert len(list(lm.generate(GenerationOptions()))) == 1


def test_n_ctx_may_be_the_trained_length_and_a_gguf_that_states_none_takes_any(tiny_config, monkeypatch):
    trained = LlamaLM.load(replace(tiny_config, n_ctx=4096))  # the tiny GGUF's own length
    assert trained.n_ctx == 4096
    trained.close()
    real = lm_module.import_llama()
    monkeypatch.setattr(lm_module, "import_llama", lambda: Patched(real, llama_model_n_ctx_train=lambda model: 0))
    unstated = LlamaLM.load(replace(tiny_config, n_ctx=8192))
    assert unstated.n_ctx == 8192
    unstated.close()


def test_the_name_is_the_ggufs_own_or_else_the_files(lm, tiny_config, monkeypatch):
    assert lm.name == "fastvlm-synth-tiny"  # general.name
    real = lm_module.import_llama()
    monkeypatch.setattr(lm_module, "import_llama", lambda: Patched(real, llama_model_meta_val_str=lambda *a: -1))
    unnamed = LlamaLM.load(tiny_config)
    assert unnamed.name == "llm"  # llm.gguf
    unnamed.close()


def test_pieces_keep_their_leading_space_and_control_tokens_print_nothing(lm):
    ids = lm.tokenize(" cat the", special=False)
    assert lm.piece(ids[0]).startswith(b" ") and b"".join(map(lm.piece, ids)) == b" cat the"
    im_start = lm.tokenize("<|im_start|>", special=True)
    assert len(im_start) == 1 and lm.piece(im_start[0]) == b"" and lm.piece(lm.im_end) == b""


def test_a_text_or_a_piece_longer_than_the_first_buffer_is_read_whole(lm):
    text = "a photo of a red disc"
    want = lm.tokenize(text, special=False)
    real = lm._ll
    asked = []

    def too_small_once(vocab, data, n, buf, n_max, add_special, special):  # as llama.cpp answers a short buffer
        asked.append(n_max)
        assert add_special is False  # the prompt carries its own markers: no BOS added, on either call
        got = real.llama_tokenize(vocab, data, n, buf, n_max, add_special, special)
        return -got if len(asked) == 1 else got

    def long_piece(vocab, token, buf, length, lstrip, special):
        assert (lstrip, special) == (0, False)  # on the second call too: the space kept, a control token empty
        if length < 300:
            return -300
        ctypes.memmove(buf, b"ab" * 150, 300)
        return 300

    lm._ll = Patched(real, llama_tokenize=too_small_once, llama_token_to_piece=long_piece)
    assert lm.tokenize(text, special=False) == want and asked[1] == len(want)
    assert lm.piece(want[0]) == lm.piece(want[1]) == b"ab" * 150


def test_a_repeat_penalty_starts_with_the_prompts_last_64_tokens_and_none_is_kept_without_one(lm):
    real, accepted = lm._ll, []
    lm._ll = Patched(real, llama_sampler_accept=lambda s, t: accepted.append(t) or real.llama_sampler_accept(s, t))
    prompt = words(lm, 100)
    for penalty, primed in ((1.0, []), (1.3, list(prompt.ids[-64:]))):
        accepted.clear()
        lm.prefill([prompt])
        tokens = lm.generate(GenerationOptions(repeat_penalty=penalty))
        next(tokens)
        tokens.close()
        assert accepted == primed


@pytest.mark.parametrize("chunk", [1, 4])
def test_a_prefill_goes_in_chunks_and_pays_for_the_logits_of_its_last_position_only(tiny_config, chunk):
    lm = LlamaLM.load(replace(tiny_config, prefill_chunk=chunk))
    calls: list[list[int]] = []
    run = lm.compute.run

    def seen(fn, ctx, batch):
        calls.append([batch.logits[i] for i in range(batch.n_tokens)])
        return run(fn, ctx, batch)

    lm.compute.run = seen
    try:
        prompt = words(lm, 10)
        lm.prefill([prompt])
        assert [len(c) for c in calls] == [chunk] * (10 // chunk) + ([10 % chunk] if 10 % chunk else [])
        assert sum(calls, []) == [0] * 9 + [1]
        calls.clear()
        lm.reset()
        lm.prefill([prompt], logits=False)  # a prepare: nothing will be sampled after it
        assert sum(calls, []) == [0] * 10
    finally:
        lm.close()


def test_a_restored_snapshot_counts_as_reused_and_answers_as_a_fresh_engine(tiny_config):
    rng = np.random.default_rng(11)
    image, other = (rng.integers(0, 256, (80, 100, 3), dtype=np.uint8) for _ in range(2))
    greedy = GenerationOptions(max_new_tokens=8, temperature=0.0)
    want = fresh_answer(tiny_config, Request(image, "And its colour?", options=greedy))
    engine = Engine.load(tiny_config)
    try:
        engine.answer(Request(image, "What is it?", options=greedy))
        (saved,) = engine.lm._snapshots._items  # the context up to the end of this image
        engine.answer(Request(other, "What is it?", options=greedy))  # the context holds the other image now
        result = engine.answer(Request(image, "And its colour?", options=greedy))
        assert result.stats.reused_tokens == len(saved)
        assert result.text == want
    finally:
        engine.close()


def test_a_second_close_frees_nothing_twice(tiny_config):
    lm = LlamaLM.load(tiny_config)
    freed = []
    real = lm._ll
    lm._ll = Patched(real, llama_free=lambda ctx: freed.append("context") or real.llama_free(ctx),
                     llama_model_free=lambda model: freed.append("model") or real.llama_model_free(model))
    lm.close()
    lm.close()
    assert freed == ["context", "model"]
