"""Incremental text output: whole UTF-8 characters from token bytes, and stop strings."""

from __future__ import annotations

import codecs


class Utf8Stream:
    """Bytes in, text out; a character split across tokens waits until it is complete."""

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._dec.decode(data)

    def flush(self) -> str:
        """What is left at the end; an unfinished character becomes U+FFFD."""
        return self._dec.decode(b"", final=True)


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


def _overlap(text: str, stop: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `stop`."""
    for n in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[-n:]):
            return n
    return 0
