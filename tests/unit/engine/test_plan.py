"""fastvlm.engine.plan: fitting a conversation into the context, in time linear in what is kept."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from fastvlm.engine import prompt
from fastvlm.engine.kv import Image, Tokens
from fastvlm.engine.events import InputError
from fastvlm.engine.plan import GAP, MAX_CHARS_PER_POSITION, MAX_TURNS, _shorten, clip, plan, tokenize_segments
from fastvlm.engine.prompt import Turn
from tests.fakes import FakeLM

IMAGE = Image("img", np.zeros((16, 8), np.float32))


class CountingTokenizer:
    """The fake byte tokenizer, counting the characters it was given."""

    def __init__(self):
        self.lm, self.chars = FakeLM(), 0

    def __call__(self, text: str, *, special: bool) -> list[int]:
        self.chars += len(text)
        return self.lm.tokenize(text, special=special)


def dropping_one_at_a_time(question, history, tokenize, budget, image_with_question=False):
    """The specification (and the old, quadratic code): drop the oldest turn until the prompt fits."""
    for dropped in range(len(history) + 1):
        lists = tokenize_segments(prompt.build(question, history[dropped:], image_with_question=image_with_question),
                                  tokenize)
        if sum(len(x) if x is not None else len(IMAGE.embeddings) for x in lists) <= budget:
            return dropped
    return len(history)


def fed(p) -> int:
    """The positions a plan's parts really take: what llama.cpp is fed (its `positions` is only a claim)."""
    return sum(len(part.ids) if isinstance(part, Tokens) else len(part.embeddings) for part in p.parts)


def random_turn(rng: random.Random) -> Turn:
    words = ["a", "cat", "on the mat", "<|im_end|>", "  ", "\x00x", "é", "what colour is it?"]
    return Turn(" ".join(rng.choices(words, k=rng.randint(0, 6))), " ".join(rng.choices(words, k=rng.randint(0, 9))))


@pytest.mark.parametrize("image_with_question", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_keeps_the_same_turns_as_dropping_the_oldest_one_at_a_time(seed, image_with_question):
    rng = random.Random(seed)
    history = tuple(random_turn(rng) for _ in range(rng.randint(0, 12)))
    question, tokenize = "and now?", FakeLM().tokenize
    budget = rng.randint(110, 500)
    dropped = dropping_one_at_a_time(question, history, tokenize, budget, image_with_question)
    p = plan(question, history, IMAGE, tokenize, budget, image_with_question=image_with_question)
    assert fed(p) == p.positions <= budget
    kept = history[dropped:]
    expected = tokenize_segments(prompt.build(question, kept, image_with_question=image_with_question), tokenize)
    if p.positions == sum(len(x) if x is not None else 16 for x in expected):  # the question was not cut
        assert p.parts == plan(question, kept, IMAGE, tokenize, 10**6, image_with_question=image_with_question).parts
    notices = " ".join(p.notices)
    assert (f"the {dropped} oldest turn(s) were left out" in notices) == (dropped > 0)


def test_trimming_a_long_conversation_tokenizes_each_kept_turn_a_bounded_number_of_times():
    turn = Turn("What is on the left?" * 3, "A red cup next to a laptop." * 3)
    history = (turn,) * 3000
    tokenize = CountingTokenizer()
    p = plan("And on the right?", history, IMAGE, tokenize, budget=2000)
    kept = len(history) - int(re.search(r"the (\d+) oldest", p.notices[0]).group(1))
    assert 0 < kept < 30
    per_turn = len(turn.question) + len(turn.answer) + sum(map(len, prompt.turn_markers()))
    # costing + the final prompt: about twice the kept text, never the whole conversation (3000 turns)
    assert tokenize.chars < 3 * (kept + 2) * per_turn + 500


def test_turns_beyond_the_cap_are_never_looked_at():
    tokenize = CountingTokenizer()
    history = (Turn("q", "a"),) * (MAX_TURNS + 10_000)
    p = plan("last?", history, IMAGE, tokenize, budget=10**9)
    assert "the 10000 oldest turn(s) were left out" in p.notices[0]
    assert tokenize.chars < 3 * MAX_TURNS * (2 + sum(map(len, prompt.turn_markers())))  # not 10500 turns
    assert p.positions == sum(len(x) if x is not None else 16 for x in
                              tokenize_segments(prompt.build("last?", history[-MAX_TURNS:]), FakeLM().tokenize))


def test_a_question_too_long_for_the_context_keeps_its_start_and_its_end():
    """A log pasted before the question: cut to its first tokens, the question itself never reached the model."""
    lm = FakeLM()  # one token a byte
    question = "LOG " + "x" * 3000 + " QUESTION: what failed?"
    whole = plan("q", (), IMAGE, lm.tokenize, 4096)
    p = plan(question, (), IMAGE, lm.tokenize, whole.positions + 200)
    assert fed(p) == p.positions == whole.positions + 200
    text = bytes(i for part in p.parts if hasattr(part, "ids") for i in part.ids if i < 256).decode("utf-8", "replace")
    assert "LOG xx" in text and "QUESTION: what failed?" in text and "\n…\n" in text
    assert any("middle was left out" in n for n in p.notices)


def test_a_pasted_book_is_not_tokenized_whole_only_to_lose_its_middle():
    """Tokenizing takes ~0.8 s a MB on 2 cores, in the engine's turn: a 5 MB question (or a turn of an API caller's
    history) is cut to its start and its end first, as the token cut would have cut it."""
    tokenize, budget = CountingTokenizer(), 2000
    book = "START " + "word " * 1_000_000 + " END: what is it about?"
    p = plan(book, (Turn(book, book),), IMAGE, tokenize, budget)
    assert tokenize.chars < 5 * budget * MAX_CHARS_PER_POSITION  # was ~20 MB: each text tokenized whole, twice
    text = bytes(i for part in p.parts if hasattr(part, "ids") for i in part.ids if i < 256).decode("utf-8", "replace")
    assert "START word" in text and "END: what is it about?" in text
    assert any("middle was left out" in n for n in p.notices) and fed(p) == p.positions <= budget


def test_a_text_cut_before_tokenizing_that_then_fits_still_says_its_middle_went():
    """Only tokens longer than any real one let the clipped text fit the context: it is still said."""
    def one_token_a_word(text: str, *, special: bool) -> list[int]:
        return FakeLM().tokenize(text, special=True) if special else [7] * len(text.split())

    question = "longword" * 1000 + " " + "long" * 10_000  # 2 words, 48 008 characters
    p = plan(question, (), IMAGE, one_token_a_word, budget=1000)
    assert p.notices == ("The question was too long for the context: its middle was left out.",)


def test_a_question_that_just_fits_is_kept_whole_and_one_position_less_cuts_it():
    lm = FakeLM()
    question = "What is written on the sign above the door?"
    whole = plan(question, (), IMAGE, lm.tokenize, 10**6)
    exact = plan(question, (), IMAGE, lm.tokenize, whole.positions)
    assert exact.parts == whole.parts and exact.notices == ()
    short = plan(question, (), IMAGE, lm.tokenize, whole.positions - 1)
    assert fed(short) == short.positions == whole.positions - 1
    n = len(tokenize_segments(prompt.build(question), lm.tokenize)[-2])  # the question's own tokens
    assert short.notices == (f"The question was too long for the context: its middle was left out ({n - 1} of its "
                             f"{n} tokens kept, from its start and its end).",)


def test_a_context_too_small_for_the_image_and_the_prompt_says_how_many_positions_they_need():
    lm, question = FakeLM(), "What is this?"
    lists = tokenize_segments(prompt.build(question), lm.tokenize)
    need = sum(len(x) if x is not None else 16 for x in lists) - len(lists[-2])  # all but the question
    p = plan(question, (), IMAGE, lm.tokenize, need + 1)  # one position for the question: its last token
    assert fed(p) == p.positions == need + 1 and "(1 of its" in p.notices[0]
    with pytest.raises(InputError, match=f"need {need} of the {need} positions"):
        plan(question, (), IMAGE, lm.tokenize, need)


def test_a_shortened_question_keeps_its_start_and_its_end_around_the_gap_or_only_its_end():
    ids, gap = list(range(100)), [-1, -1, -1]
    assert _shorten(ids, 9, gap) == [0, 1, 2, -1, -1, -1, 97, 98, 99]
    assert _shorten(ids, 8, gap) == [0, 1, -1, -1, -1, 97, 98, 99]  # the fewest that keep both ends
    assert _shorten(ids, 7, gap) == [93, 94, 95, 96, 97, 98, 99]


def test_a_text_is_clipped_past_its_characters_per_position():
    most = 2 * MAX_CHARS_PER_POSITION
    text = "".join(chr(ord("a") + i % 26) for i in range(most))
    assert clip(text, 2) == text
    longer = text + "XYZ"
    assert clip(longer, 2) == longer[:most // 2] + GAP + longer[-(most // 2):]
    half = MAX_CHARS_PER_POSITION // 2
    assert clip(longer, 0) == clip(longer, 1) == longer[:half] + GAP + longer[-half:]  # at least one position
