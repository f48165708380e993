"""What the UI needs from an engine: `fastvlm.engine.Engine` fits, and so could a remote backend later."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from fastvlm.engine.events import Event, Request
from fastvlm.engine.prompt import Turn


class Backend(Protocol):
    """Single-flight answering: one inference at a time, no per-user state."""

    continues_answers: bool  # a request's `answer_so_far` is understood: a stopped answer can go on

    def stream(self, request: Request, wait: float | None = None, cancel=None) -> Iterator[Event]:
        """Events of one answer. `wait=0` raises `fastvlm.engine.events.Busy` on the first `next()` if the
        engine is serving someone else; closing the iterator stops decoding and frees the engine."""
        ...

    def prepare(self, image: Any, resolution: int | None = None, words: str = "",
                history: tuple[Turn, ...] = (), image_with_question: bool = False) -> bool:
        """Encode `image` (and prefill its prompt prefix, the conversation's earlier turns `history`, and `words`, a
        question's first words, laid out as `Request` lays them out) while idle; False when busy. `image` None:
        the turns before the image alone (`image_with_question`)."""
        ...

    def describe(self) -> dict:
        """model, synthetic, vision, llm, resolution, threads, n_ctx, busy."""
        ...

    @property
    def busy(self) -> bool: ...
