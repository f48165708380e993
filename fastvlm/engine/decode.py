"""One answer's decode: sampled tokens -> `FirstToken`, `TextDelta`s in whole characters, and `Done` with why it
stopped (the end of the turn, a stop string, the length limit, the context, a Stop)."""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace

from .cancel import CancelToken
from .config import GenerationOptions
from .events import Done, Event, FirstToken, Stats, StopReason, TextDelta
from .kv import LRU
from .lm import LanguageModel
from .textstream import AnswerText


class Decode:
    """Decodes one answer after its prompt was prefilled. `before` (text, ids): the answer's words so far, which
    this decode continues; they count against `max_new_tokens`. `answer` says which ids spelled the text."""

    def __init__(self, lm: LanguageModel, options: GenerationOptions, cancel: CancelToken,
                 clock: Callable[[], float], before: tuple[str, tuple[int, ...]] = ("", ())) -> None:
        self.lm, self.options, self.cancel, self.clock = lm, options, cancel, clock
        self.answer = AnswerText(lm.piece, options.stop, before)
        self.limit = options.max_new_tokens - len(before[1])
        self.sampled = 0  # tokens sampled, the one that ended the answer included
        self.first_at: float | None = None

    def events(self, stats: Stats, t0: float) -> Iterator[Event]:
        """The answer's events; `stats` (its earlier stages) is completed in the closing `Done`."""
        reason: StopReason = "max_tokens"  # the words so far already reach the limit
        if self.limit >= 1:
            opts = self.options
            tokens = self.lm.generate(opts, opts.seed if opts.seed is not None else random.getrandbits(32))
            try:
                reason = yield from self._steps(tokens, t0)
            finally:
                tokens.close()
            if reason not in ("stop_string", "cancelled"):
                out, _ = self.answer.flush()
                if out:
                    yield TextDelta(out)
        t_end = self.clock()
        first = t_end if self.first_at is None else self.first_at
        yield Done(replace(stats, ttft_s=first - t0 if self.sampled else 0.0, decode_s=t_end - first,
                           total_s=t_end - t0, new_tokens=self.sampled, stop_reason=reason))

    def _steps(self, tokens: Iterator[int], t0: float) -> Generator[Event, None, StopReason]:
        for token in tokens:
            if self.first_at is None:
                self.first_at = self.clock()
                yield FirstToken(self.first_at - t0)
            self.sampled += 1
            if self.cancel.cancelled:
                return "cancelled"
            end = self.lm.stop_reason(token)
            if end is not None:
                return end
            out, hit = self.answer.feed(token)
            if out:
                yield TextDelta(out)
            if hit:
                return "stop_string"
            if self.sampled >= self.limit:
                return "max_tokens"
        return "context_full"


class AnswerIds:
    """Recent answers' exact token ids by their text, those stopped part way too: a prompt quoting an answer (a
    follow-up's history, a continuation) is then the very positions in the KV cache, where tokenizing the text
    again may split it differently. An answer's start is found too (`ids(text, start=True)`), at a token's end:
    a client may stop reading a streamed answer a little before the server stops making it."""

    def __init__(self, capacity: int = 64) -> None:
        self._lru = LRU(capacity)  # text -> (ids, where each id's text ends)

    def put(self, text: str, ids: tuple[int, ...], ends: tuple[int, ...]) -> None:
        if text:
            self._lru.put(text, (ids, ends))

    def ids(self, text: str, start: bool = False) -> list[int] | None:
        """The ids that spelled `text` (or, with `start`, an answer that began with it), or None."""
        hit = self._lru.get_fresh(text)
        if hit is not None:
            return list(hit[0])
        for whole, (ids, ends) in reversed(self._lru.items()) if start else ():
            if whole.startswith(text) and len(text) in ends:  # the first id whose text ends there, and exactly
                return list(ids[:ends.index(len(text)) + 1])
        return None
