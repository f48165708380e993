"""Typed results of a streaming request: the events `Engine.stream()` yields.

A stream yields zero or more `Notice`s, then `FirstToken` right before the
first `TextDelta`, more `TextDelta`s, and exactly one `Done` at the end.
`Result` is what `Engine.answer()` builds by draining that stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Generator, Iterable
from typing import Any, Literal

from .config import GenerationOptions
from .prompt import Turn

StopReason = Literal["end_of_turn", "end_of_text", "max_tokens", "context_full", "stop_string", "cancelled"]


@dataclass(frozen=True)
class Request:
    """One question about one image, optionally continuing a conversation about it.

    `image` is a PIL image, an HxWx3 uint8 array (a webcam frame), a path or encoded bytes.
    `history` holds the earlier turns, oldest first: about the same image, which goes in the first turn, or with
    `image_with_question` about earlier ones, as text before the question's turn, which holds the image (a
    camera's new frame for each question).
    `answer_so_far`: the answer's own words as an earlier stream of this request gave them before it was stopped;
    the answer goes on from there, the stream yields only what follows, and `max_new_tokens` counts both.
    """

    image: Any
    question: str = ""
    history: tuple[Turn, ...] = ()
    options: GenerationOptions = field(default_factory=GenerationOptions)
    resolution: int | None = None  # None: the engine's configured resolution
    answer_so_far: str = ""
    image_with_question: bool = False


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer, always whole UTF-8 characters."""

    text: str


@dataclass(frozen=True)
class FirstToken:
    """The first answer token was sampled; `ttft_s` counts from the request's start."""

    ttft_s: float


@dataclass(frozen=True)
class Notice:
    """Something the person should know about this request (e.g. a trimmed conversation)."""

    message: str


@dataclass(frozen=True)
class Stats:
    """Per-stage timings (seconds) and token counts of one request."""

    preprocess_s: float = 0.0
    encode_s: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    ttft_s: float = 0.0
    total_s: float = 0.0
    prompt_tokens: int = 0  # positions in the prompt, image positions included
    image_tokens: int = 0
    reused_tokens: int = 0  # prompt positions served from the KV cache
    new_tokens: int = 0
    embedding_cached: bool = False
    stop_reason: StopReason = "end_of_turn"

    @property
    def prefilled_tokens(self) -> int:
        """Prompt positions this request computed (not served from the KV cache)."""
        return self.prompt_tokens - self.reused_tokens

    @property
    def tokens_per_s(self) -> float:
        """Decode speed over the tokens after the first one (the first is part of TTFT)."""
        if self.new_tokens <= 1 or self.decode_s <= 0:
            return 0.0
        return (self.new_tokens - 1) / self.decode_s


@dataclass(frozen=True)
class Done:
    stats: Stats


Event = TextDelta | FirstToken | Notice | Done


@dataclass(frozen=True)
class Result:
    text: str
    stats: Stats
    notices: tuple[str, ...] = ()


class ResultBuilder:
    """Accumulates a stream's events into a `Result` (for `answer()`-style callers, sync or async)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.notices: list[str] = []
        self.stats = Stats()

    def add(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.parts.append(event.text)
        elif isinstance(event, Notice):
            self.notices.append(event.message)
        elif isinstance(event, Done):
            self.stats = event.stats

    def result(self) -> Result:
        return Result("".join(self.parts), self.stats, tuple(self.notices))


def collect(events: Iterable[Event]) -> Result:
    """Drain a stream: what `answer()` returns."""
    builder = ResultBuilder()
    for event in events:
        builder.add(event)
    return builder.result()


def all_but_done(events: Iterable[Event]) -> Generator[Event, None, Done | None]:
    """Every event of a stream but its `Done`, which is returned (so it can be sent after the engine is free).
    Closed early, it closes `events` before it returns: their clean-up runs while the engine is still held."""
    done = None
    try:
        for event in events:
            if isinstance(event, Done):
                done = event
            else:
                yield event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return done


class Busy(RuntimeError):
    """The engine is serving another request and the caller chose not to wait (longer)."""


class InputError(ValueError):
    """The request itself is unusable (broken image, bad option); the message says why and what to do."""


class ModelFileError(RuntimeError):
    """A weight file is missing, unreadable or does not match its partner; the message names file and fix."""
