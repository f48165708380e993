"""Incremental text output: whole UTF-8 characters from token bytes, and stop strings."""

from __future__ import annotations

import codecs
from collections.abc import Callable


class Utf8Stream:
    """Bytes in, text out; a character split across tokens waits until it is complete."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._dec.decode(data)

    def flush(self) -> str:
        """What is left at the end; an unfinished character becomes U+FFFD."""
        return self._dec.decode(b"", final=True)

    @property
    def whole(self) -> bool:
        """No character is waiting for its next bytes."""
        return not self._dec.getstate()[0]


class StopMatcher:
    """Holds back text that could be the start of a stop string; reports the first full match."""

    def __init__(self, stops: tuple[str, ...]):
        self._stops = tuple(s for s in stops if s)
        self._pending = ""

    def feed(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to emit, whether a stop string was hit)."""
        if not self._stops:
            return text, False
        buf = self._pending + text
        hits = [i for i in (buf.find(s) for s in self._stops) if i >= 0]
        if hits:
            self._pending = ""
            return buf[: min(hits)], True
        hold = max((_overlap(buf, s) for s in self._stops), default=0)
        self._pending = buf[len(buf) - hold :] if hold else ""
        return buf[: len(buf) - hold], False

    def flush(self) -> str:
        out, self._pending = self._pending, ""
        return out

    @property
    def holding(self) -> bool:
        """Text is held back (it could start a stop string)."""
        return bool(self._pending)


class AnswerText:
    """One answer's tokens -> the text streamed, and which tokens spell it. `before` (text, ids): the answer's
    words so far, which this stream continues."""

    def __init__(self, piece: Callable[[int], bytes], stops: tuple[str, ...],
                 before: tuple[str, tuple[int, ...]] = ("", ())) -> None:
        self._piece, self._utf8, self._stops = piece, Utf8Stream(), StopMatcher(stops)
        self._before = before
        self.ids: list[int] = []
        self.pieces: list[str] = []
        self.stopped = False  # a stop string was hit: the ids spell more than the text
        self.unspelled = False  # a control token (it has no text: `piece` gives b"") is among the ids
        # per id, the length of the text streamed once it was fed, where the ids up to it spell exactly that text
        # (-1: they do not, or it is not known: inside the words before, a character or held-back text unfinished)
        self._chars = len(before[0])
        self.ends: list[int] = [*([-1] * (len(before[1]) - 1)), self._chars] if before[1] else []

    def feed(self, token: int) -> tuple[str, bool]:
        """(text safe to stream, whether a stop string was hit)."""
        self.ids.append(token)
        piece = self._piece(token)
        self.unspelled |= not piece
        out, hit = self._stops.feed(self._utf8.feed(piece))
        self._out(out, hit)
        self.ends.append(self._chars if self._utf8.whole and not self._stops.holding else -1)
        return out, hit

    def flush(self) -> tuple[str, bool]:
        """What is left at the end."""
        out, hit = self._stops.feed(self._utf8.flush())
        out += "" if hit else self._stops.flush()
        return self._out(out, hit)

    def _out(self, out: str, hit: bool) -> tuple[str, bool]:
        if out:
            self.pieces.append(out)
            self._chars += len(out)
        self.stopped |= hit
        return out, hit

    def spelled(self) -> tuple[str, tuple[int, ...], tuple[int, ...]] | None:
        """(the whole answer's text, the ids that spell it exactly, where each id's text ends), the words before
        included; None while some of the tokens' text is held back, or a control token is among them (then the
        ids say more than the text; user text that matches it must never be fed as those ids)."""
        if self.stopped or self.unspelled or not self._utf8.whole or self._stops.holding:
            return None
        return self._before[0] + "".join(self.pieces), self._before[1] + tuple(self.ids), tuple(self.ends)


def _overlap(text: str, stop: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `stop`."""
    for n in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[-n:]):
            return n
    return 0
