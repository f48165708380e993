"""llama.cpp's real sizes and sampler state on the tiny model: no abort from a batch larger than the
context's, n_ctx checked at start, no KV snapshot without KV reuse, a repeat penalty that sees the prompt."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fastvlm import GenerationOptions, Request
from fastvlm.engine.engine import Engine
from fastvlm.engine.kv import Tokens
from fastvlm.engine.lm import LlamaLM

ROOT = Path(__file__).resolve().parents[2]

_BIG_BATCH = """
import sys
from fastvlm import EngineConfig
from fastvlm.engine.kv import Tokens
from fastvlm.engine.lm import LlamaLM
lm = LlamaLM.load(EngineConfig(vision_path=sys.argv[1], llm_path=sys.argv[2], threads=1, n_ctx=600, n_batch=1024))
ids = lm.tokenize("a picture of a cat " * 200, special=False)[:700]  # more than llama.cpp's clamped batch of 600
lm.prefill([Tokens(tuple(ids))])
print(lm.n_ctx, lm.n_batch)
"""


def test_a_batch_larger_than_the_contexts_own_does_not_abort_the_process(tiny_models):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_BIG_BATCH), str(tiny_models.vision),
                           str(tiny_models.llm)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-1500:]  # was SIGABRT: GGML_ASSERT(n_tokens_all <= cparams.n_batch)
    n_ctx, n_batch = map(int, done.stdout.split()[-2:])
    assert n_ctx >= 700 and n_batch <= 600  # llama.cpp padded the context and clamped the batch; we use both


def test_n_ctx_is_checked_at_start(tiny_config):
    with pytest.raises(ValueError, match=r"n_ctx must be at least 512.*pass --n-ctx 512 or more"):
        replace(tiny_config, n_ctx=300)
    with pytest.raises(ValueError, match=r"more than the 4096 positions llm.gguf was trained for: pass --n-ctx 4096"):
        LlamaLM.load(replace(tiny_config, n_ctx=8192))


def test_without_kv_reuse_no_snapshot_is_restored(tiny_config, tiny_engine):
    engine = Engine.load(replace(tiny_config, kv_reuse=False, embedding_cache=0))  # kv_snapshots stays 4
    try:
        image = np.random.default_rng(5).integers(0, 256, (80, 120, 3), dtype=np.uint8)
        for question in ("What is it?", "And the colour?", "What is it?"):
            request = Request(image, question, options=GenerationOptions(max_new_tokens=8))
            result = engine.answer(request)
            assert result.stats.reused_tokens == 0  # every request prefilled from scratch
            assert result.text == tiny_engine.answer(request).text  # and answers as the reusing engine does
    finally:
        engine.close()


def first_tokens(lm: LlamaLM, prompt: str, penalty: float, n: int = 30) -> tuple[list[int], list[int]]:
    ids = lm.tokenize(prompt, special=True)
    lm.prefill([Tokens(tuple(ids))])
    tokens = lm.generate(GenerationOptions(repeat_penalty=penalty))
    try:
        return ids, [next(tokens) for _ in range(n)]
    finally:
        tokens.close()


def test_the_repeat_penalty_counts_the_prompts_tokens(tiny_config):
    lm = LlamaLM.load(tiny_config)
    try:
        prompt = "<|im_start|>user\nthe the the the cat cat<|im_end|>\n<|im_start|>assistant\n"
        ids, plain = first_tokens(lm, prompt, 1.0)
        assert set(plain) & set(ids)  # unpenalised, this model repeats words of the prompt
        ids, penalised = first_tokens(lm, prompt, 1e4)
        assert len(ids) + len(penalised) <= 64  # all inside the penalty's window
        assert not set(penalised) & set(ids)  # was [378, 554]: only generated tokens were counted
    finally:
        lm.close()


class Patched:
    """llama-cpp-python with the functions given as keywords replaced, the rest passed through."""

    def __init__(self, ll, **functions):
        self._ll, self._functions = ll, functions

    def __getattr__(self, name):
        return self._functions.get(name) or getattr(self._ll, name)


def test_a_refused_cut_of_the_kv_cache_prefills_the_prompt_again_from_its_start(tiny_config):
    lm = LlamaLM.load(tiny_config)
    try:
        prompt = "<|im_start|>user\na picture of a {}<|im_end|>\n<|im_start|>assistant\n"
        cat, dog = (tuple(lm.tokenize(prompt.format(w), special=True)) for w in ("cat", "dog"))
        _, expected = first_tokens(lm, prompt.format("dog"), 1.0, n=8)  # the dog prompt, from an empty cache
        lm.reset()
        lm.prefill([Tokens(cat)])
        lm._ll = Patched(lm._ll, llama_memory_seq_rm=lambda *args: False)  # a cut part way refused, as llama.cpp
        # allows for memory that cannot cut part way
        assert lm.prefill([Tokens(dog)]) == 0  # nothing kept (was RuntimeError "internal: chunk at 8, context holds 0")
        tokens = lm.generate(GenerationOptions(repeat_penalty=1.0))  # as `first_tokens`
        try:
            assert [next(tokens) for _ in range(8)] == expected
        finally:
            tokens.close()
    finally:
        lm.close()
