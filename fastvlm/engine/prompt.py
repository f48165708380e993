"""Qwen2 ChatML prompts for FastVLM, as data.

A prompt is a tuple of `Segment`s: template text (its `<|...|>` markers are
special tokens), user text (tokenized as plain text, never as markers), and
one image slot where the N image vectors go.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

SYSTEM = "You are a helpful assistant."
IMAGE = "<image>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
DEFAULT_QUESTION = "Describe the image."

SegmentKind = Literal["template", "user", "image"]


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    text: str = ""


@dataclass(frozen=True)
class Turn:
    """One finished exchange of a conversation."""

    question: str
    answer: str


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def encodable(text: str) -> str:
    """Text that encodes as UTF-8: a lone UTF-16 surrogate (half an emoji, valid in JSON as "\\ud83d") becomes
    U+FFFD, the replacement character, instead of failing the request after its image was encoded."""
    return _SURROGATE.sub("\ufffd", text)


def clean_user_text(text: str) -> str:
    """Drop NULs and control characters (tabs and newlines stay), replace lone surrogates, compose accents (NFC,
    as Qwen2's tokenizer does before it splits: llama.cpp does not, so "e" + U+0301 would reach the model as other
    tokens than "é"); strip outer whitespace."""
    return unicodedata.normalize("NFC", encodable(_CONTROL.sub("", text))).strip()


def question_or_default(question: str) -> str:
    return clean_user_text(question) or DEFAULT_QUESTION


_USER, _ASSISTANT, _CLOSE = f"{IM_START}user\n", f"{IM_END}\n{IM_START}assistant\n", f"{IM_END}\n"


def turn_markers() -> tuple[str, str, str]:
    """The template text a finished turn after the first adds: its opener, the assistant header, the close."""
    return _USER, _ASSISTANT, _CLOSE


def image_turn(turns: int, image_with_question: bool) -> int:
    """Which of a conversation's `turns` (the question's own counted) holds the image: the first, or the question's."""
    return turns - 1 if image_with_question else 0


def build(question: str, history: tuple[Turn, ...] = (), system: str = SYSTEM,
          image_with_question: bool = False) -> tuple[Segment, ...]:
    """The whole prompt. The image goes in the first turn (a conversation about one image), or, with
    `image_with_question`, in the question's own turn after the earlier turns as text (a camera's new frame for
    each question; LLaVA-style chat templates put the image at the start of whichever message holds it). Either
    way a question without history gets the same prompt."""
    turns = [*((t.question, t.answer) for t in history), (question, None)]
    at = image_turn(len(turns), image_with_question)
    segs: list[Segment] = [Segment("template", f"{IM_START}system\n{system}{IM_END}\n")]
    for i, (q, a) in enumerate(turns):
        segs += [Segment("template", _USER), Segment("image"), Segment("template", "\n")] if i == at else \
            [Segment("template", _USER)]
        segs += [Segment("user", question_or_default(q)), Segment("template", _ASSISTANT)]
        if a is not None:
            segs += [Segment("user", a), Segment("template", _CLOSE)]
    return tuple(_merge(segs))


def _merge(segs: list[Segment]) -> list[Segment]:
    """Join neighbouring template segments so each is tokenized in one piece."""
    out: list[Segment] = []
    for s in segs:
        if out and s.kind == "template" and out[-1].kind == "template":
            out[-1] = Segment("template", out[-1].text + s.text)
        else:
            out.append(s)
    return out


def render(segments: tuple[Segment, ...]) -> str:
    """The prompt as one string, with `<image>` where the image goes (for logs and tests)."""
    return "".join(IMAGE if s.kind == "image" else s.text for s in segments)
