"""From a conversation to the positions llama.cpp is fed: tokenize, splice the image, fit the context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import prompt
from .config import PATCH
from .events import InputError
from .kv import Image, Part, Tokens
from .prompt import Segment, Turn

Tokenize = Callable[..., list[int]]  # (text, *, special) -> ids
MAX_TURNS = 500  # earlier turns are never looked at (a context of 32k positions holds fewer); the API refuses more
WORDS_AHEAD_TOKENS = 64  # the most of a question still being spoken that `prepare()` prefills
# a text of more characters than this many per position the context leaves loses its middle before it is
# tokenized (only a text of longer tokens than any real one would have fitted): tokenizing costs ~0.8 s a MB on
# 2 cores, in the engine's turn, and a pasted book would lose its middle to the context anyway
MAX_CHARS_PER_POSITION = 32


@dataclass(frozen=True)
class Plan:
    parts: tuple[Part, ...]
    positions: int
    notices: tuple[str, ...] = ()


def tokenize_segments(segments: tuple[Segment, ...], tokenize: Tokenize) -> list[list[int] | None]:
    """Token ids per segment (None for the image slot). Template markers are special; user text never is."""
    return [None if s.kind == "image" else tokenize(s.text, special=s.kind == "template") for s in segments]


def to_parts(token_lists: list[list[int] | None], image: Image) -> tuple[Part, ...]:
    parts: list[Part] = []
    run: list[int] = []
    for ids in token_lists:
        if ids is None:
            parts += [Tokens(tuple(run)), image]
            run = []
        else:
            run += ids
    if run:
        parts.append(Tokens(tuple(run)))
    return tuple(p for p in parts if not (isinstance(p, Tokens) and not p.ids))


def prefix_parts(image: Image, tokenize: Tokenize, words: str = "", history: tuple[Turn, ...] = (),
                 budget: int | None = None, image_with_question: bool = False) -> tuple[Part, ...]:
    """System prompt + image: what `prepare()` puts in the KV cache before the question is known. With `history`
    (the conversation's earlier turns) the prompt goes on through them up to the next question's opener, with
    `words` (the question's first words, heard while it is still spoken) up to the end of those words, each
    tokenized as `plan` tokenizes them (so the answer reuses them); at most `WORDS_AHEAD_TOKENS` of the words, and
    only the newest turns that leave room for a question in `budget` positions (None: all of them).
    `image_with_question`: the turns go before the image (`prompt.build`)."""
    words = prompt.clean_user_text(words)
    if budget is not None:
        history = _newest_that_fit(words, history[-MAX_TURNS:], len(image.embeddings), tokenize, budget)
    if not words and not history:
        return to_parts(tokenize_segments(prompt.build("")[:2], tokenize), image)
    segments = prompt.build(words, history, image_with_question=image_with_question)
    lists = tokenize_segments(segments[:-1] if words else segments[:-2], tokenize)  # not the assistant's header
    if words:
        lists[-1] = lists[-1][:WORDS_AHEAD_TOKENS]
    return to_parts(lists, image)


def stand_in(size: int, dim: int) -> Image:
    """An image of `size` that is never prefilled: it holds the place (and counts the positions) of a frame not
    known yet, so that `prefix_parts` keeps the turns that leave room for it."""
    return Image(f"stand-in@{size}", np.zeros(((size // PATCH) ** 2, dim), np.float32))


def before_image(parts: tuple[Part, ...]) -> tuple[Part, ...]:
    """The parts before the first image."""
    first = next((i for i, part in enumerate(parts) if isinstance(part, Image)), len(parts))
    return parts[:first]


def _count(token_lists: list[list[int] | None], n_image: int) -> int:
    return sum(n_image if ids is None else len(ids) for ids in token_lists)


GAP = "\n…\n"  # where a question too long for the context lost its middle


def plan(question: str, history: tuple[Turn, ...], image: Image, tokenize: Tokenize, budget: int,
         answer_so_far: Sequence[int] = (), image_with_question: bool = False) -> Plan:
    """Fit the prompt into `budget` positions: drop the oldest turns first, then shorten the question.
    `answer_so_far` (token ids of plain text) follows the assistant's header: an answer to go on from; never cut.
    `image_with_question`: the image goes in the question's turn, after the turns (`prompt.build`).

    Linear in what is kept: turns are costed newest first, each tokenized once, and the walk stops at the
    first turn that does not fit (older turns, and any beyond `MAX_TURNS`, are never tokenized).
    """
    n_image = len(image.embeddings)
    notices: list[str] = []
    said = list(answer_so_far)
    budget -= len(said)
    asked, question = question, clip(question, budget)
    kept = _newest_that_fit(question, history[-MAX_TURNS:], n_image, tokenize, budget)
    while True:
        lists = tokenize_segments(prompt.build(question, kept, image_with_question=image_with_question), tokenize)
        total = _count(lists, n_image)
        if total <= budget or not kept:
            break
        kept = kept[1:]  # only when the costing was not additive (a tokenizer merging across segments)
    if len(kept) < len(history):
        notices.append(f"The conversation was too long for the context: the {len(history) - len(kept)} "
                       "oldest turn(s) were left out.")
    if total > budget:
        q = _question_index(lists)
        keep = len(lists[q]) - (total - budget)
        if keep < 1:
            raise InputError(f"the image and the prompt alone need {total - len(lists[q])} of the {budget} positions "
                             "the context leaves: lower the resolution, or start the server with a larger --n-ctx")
        lists[q] = _shorten(lists[q], keep, tokenize(GAP, special=False))
        notices.append(f"The question was too long for the context: its middle was left out ({keep} of its "
                       f"{keep + total - budget} tokens kept, from its start and its end).")
        total = budget
    elif question is not asked:
        notices.append("The question was too long for the context: its middle was left out.")
    return Plan(to_parts([*lists, said], image), total + len(said), tuple(notices))


def _newest_that_fit(question: str, history: tuple[Turn, ...], n_image: int, tokenize: Tokenize,
                     budget: int) -> tuple[Turn, ...]:
    """The longest run of newest turns whose positions, added to the question's prompt, fit `budget`.

    Adding a turn adds its question, its answer and one turn's template markers, wherever the image goes (with the
    image in the first turn, the new oldest turn takes the image turn's opener and the question the opener of a
    later turn: they cancel out)."""
    total = _count(tokenize_segments(prompt.build(question), tokenize), n_image)
    markers = sum(len(tokenize(t, special=True)) for t in prompt.turn_markers())
    n = 0
    for turn in reversed(history):
        total += markers + len(tokenize(clip(prompt.question_or_default(turn.question), budget), special=False))
        total += len(tokenize(clip(turn.answer, budget), special=False))
        if total > budget:
            break
        n += 1
    return history[len(history) - n:]


def _shorten(ids: list[int], keep: int, gap: list[int]) -> list[int]:
    """`keep` of `ids`: their start and their end with `gap` between (a question pasted after a long text, or a
    text after a question, keeps both); only the end when too few are kept for that."""
    if keep < 2 * len(gap) + 2:
        return ids[len(ids) - keep:]
    head = (keep - len(gap)) // 2
    return ids[:head] + gap + ids[len(ids) - (keep - len(gap) - head):]


def clip(text: str, budget: int) -> str:
    """`text`, or, past `MAX_CHARS_PER_POSITION` characters per position of `budget`, its start and its end with
    `GAP` between (as the token cut keeps them): too long for the context either way, it is not tokenized whole."""
    most = max(budget, 1) * MAX_CHARS_PER_POSITION
    if len(text) <= most:
        return text
    return text[:most // 2] + GAP + text[len(text) - most // 2:]


def _question_index(lists: list[list[int] | None]) -> int:
    """The last user segment is the question; it sits just before the closing template segment."""
    return len(lists) - 2
