"""The sampler chain `build_sampler` asks llama.cpp for, per option: which samplers, in which order, with what.

llama.cpp's own samplers make several of these choices invisible in the tokens (a top-k of 0 keeps every token, a
temperature of 0 keeps only the best), so the chain is read off a recording stand-in for llama-cpp-python.
"""

from __future__ import annotations

import pytest

from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.lm import PENALTY_LAST_N, build_sampler

VOCAB = 1000


class Recorder:
    """llama-cpp-python's sampler functions, each recording its name and arguments; the chain is a list."""

    def __init__(self):
        self.chain: list[tuple] = []

    def llama_sampler_chain_default_params(self):
        return "params"

    def llama_sampler_chain_init(self, params):
        assert params == "params"
        return self.chain

    def llama_sampler_chain_add(self, chain, sampler):
        chain.append(sampler)

    def __getattr__(self, name):
        if not name.startswith("llama_sampler_init_"):
            raise AttributeError(name)
        return lambda *args: (name.removeprefix("llama_sampler_init_"), *args)


def chain(seed: int = 7, **options) -> list[tuple]:
    return build_sampler(Recorder(), VOCAB, GenerationOptions(**options), seed)


@pytest.mark.parametrize("options, expected", [
    ({}, [("greedy",)]),  # the default: greedy, nothing random
    ({"temperature": 0.0, "top_k": 5, "top_p": 0.5}, [("greedy",)]),  # top-k and top-p only shape a random draw
    ({"temperature": 0.7}, [("top_k", 40), ("temp", 0.7), ("dist", 7)]),
    ({"temperature": 0.7, "top_k": 1}, [("top_k", 1), ("temp", 0.7), ("dist", 7)]),
    ({"temperature": 0.7, "top_k": 0}, [("temp", 0.7), ("dist", 7)]),  # 0 turns top-k off
    ({"temperature": 1.0, "top_k": 0, "top_p": 0.9}, [("top_p", 0.9, 1), ("temp", 1.0), ("dist", 7)]),
    ({"temperature": 1.0, "top_k": 0, "top_p": 1.0}, [("temp", 1.0), ("dist", 7)]),  # 1 turns top-p off
    ({"temperature": 0.2, "top_k": 3, "top_p": 0.5}, [("top_k", 3), ("top_p", 0.5, 1), ("temp", 0.2), ("dist", 7)]),
])
def test_each_option_adds_its_sampler_in_llama_cpps_order(options, expected):
    assert chain(**options) == expected


@pytest.mark.parametrize("penalty", [1.1, 2.0, 0.9])
def test_a_repeat_penalty_other_than_1_comes_first_and_looks_back_64_tokens(penalty):
    expected = ("penalties", VOCAB, PENALTY_LAST_N, penalty, 0.0, 0.0)  # no frequency or presence penalty
    assert chain(repeat_penalty=penalty) == [expected, ("greedy",)]
    assert chain(repeat_penalty=penalty, temperature=0.5, top_k=0)[0] == expected
    assert PENALTY_LAST_N == 64  # llama.cpp's own default window (`repeat_last_n`)


def test_a_repeat_penalty_of_1_adds_no_sampler():
    assert chain(repeat_penalty=1.0, temperature=0.5, top_k=0) == [("temp", 0.5), ("dist", 7)]


@pytest.mark.parametrize("seed, drawn", [(0, 0), (2**32 - 1, 2**32 - 1), (2**32 + 5, 5), (-1, 2**32 - 1)])
def test_the_seed_is_cut_to_the_32_bits_llama_cpp_takes(seed, drawn):
    assert chain(seed, temperature=0.5, top_k=0)[-1] == ("dist", drawn)
