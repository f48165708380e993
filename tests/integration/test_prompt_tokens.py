"""The prompt's ids, as the engine makes them (its segments, llama.cpp's tokenizer), against a Qwen2-style Hugging
Face tokenizer of the same vocabulary on the reference ChatML string: the ids transformers would feed the model."""

from __future__ import annotations

import pytest
import transformers

from fastvlm.engine import prompt
from fastvlm.synth.tokenizer import build_vocab, write_tokenizer
from fastvlm.verify.parity import TOKENIZER_QUESTIONS, prompt_ids, reference_text, tokenizer_agrees
from tests.unit.engine.test_prompt import REFERENCE

QUESTIONS = [
    "What is written on the sign?",
    "Is this cafe\u0301 open?",  # a decomposed accent: NFC makes it the one character "é"
    "Who is \u1112\u1161\u11ab?",  # Hangul as jamo, as some keyboards send it
    "A\u030angstro\u0308m, nai\u0308ve, \u00fcber",  # decomposed and composed side by side
    "\U0001f469\u200d\U0001f469\u200d\U0001f467 \u732b\u304c\u597d\u304d? \uff21\ufb01",  # emoji, CJK, NFKC-only
    "tab\there\nand a new line,  two spaces",
    *TOKENIZER_QUESTIONS,  # what parity and convert's check ask of a real checkpoint's tokenizer
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer(build_vocab(), out)  # the tiny model's vocabulary, Qwen2's normalizer and splitter
    return out


@pytest.fixture(scope="module")
def reference(tokenizer_dir):
    return transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir))


def test_the_reference_text_is_the_chatml_prompt():
    assert prompt.IMAGE.join(reference_text("What is this?")) == REFERENCE


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_engine_tokenizes_the_prompt_as_the_reference_does(tiny_engine, reference, question):
    want = [reference.encode(t, add_special_tokens=False) for t in reference_text(question)]
    assert prompt_ids(question, tiny_engine.lm.tokenize) == want


def test_parity_names_the_question_the_tokenizers_disagree_on(tiny_engine, tokenizer_dir, caplog):
    agreeing = {q: prompt_ids(q, tiny_engine.lm.tokenize) for q in TOKENIZER_QUESTIONS}
    assert tokenizer_agrees(tokenizer_dir, agreeing)
    before, after = agreeing[TOKENIZER_QUESTIONS[0]]
    one_off = {**agreeing, TOKENIZER_QUESTIONS[0]: [before, after[:-1]]}
    assert not tokenizer_agrees(tokenizer_dir, one_off)
    assert repr(TOKENIZER_QUESTIONS[0]) in caplog.text and repr(TOKENIZER_QUESTIONS[1]) not in caplog.text
