"""Streamed answer text -> whole sentences, each as soon as it is complete, so speech can start early.

"Dr. Smith", "e.g. this", "3.14", "No. 5", "J. Doe" and "1. item" do not end a sentence; "There are 3. They ..." does.
A sentence ended by a period is released once the next word's first letter shows it is not an abbreviation.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

# Terminators, closing quotes/brackets, then whitespace; or a line break (list items, paragraphs).
_BOUNDARY = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+|\n")
_LAST_TOKEN = re.compile(r"(\S+)$")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc approx inc ltd co corp mt cf al dept est ca".split()
)


class SentenceChunker:
    """Feed text deltas; get back the sentences they complete. `flush()` gives what is left at the end."""

    def __init__(self, max_chars: int = 250) -> None:
        if max_chars < 20:
            raise ValueError("max_chars must be at least 20")
        self.max_chars = max_chars  # a longer run without a sentence end is split at a comma or a space
        self._buf = ""

    def feed(self, delta: str) -> list[str]:
        self._buf += delta
        sentences = []
        while (cut := self._next_cut()) is not None:
            sentence, self._buf = self._buf[:cut].strip(), self._buf[cut:]
            if sentence:
                sentences.append(sentence)
        while len(self._buf) > self.max_chars:
            cut = _soft_cut(self._buf, self.max_chars)
            sentences.append(self._buf[:cut].strip())
            self._buf = self._buf[cut:]
        return [s for s in sentences if s]

    def flush(self) -> str | None:
        """The unfinished last sentence (the stream ended), or None when nothing is left."""
        rest, self._buf = self._buf.strip(), ""
        return rest or None

    def _next_cut(self) -> int | None:
        buf = self._buf
        for m in _BOUNDARY.finditer(buf):
            if m.group() == "\n" or "!" in m.group() or "?" in m.group():
                return m.end()
            if m.end() == len(buf):
                return None  # a period: wait for the next word to see whether it ends the sentence
            if buf[m.end()].islower() or buf[m.end()].isdigit() or _is_abbreviation(buf[: m.start()]):
                continue
            return m.end()
        return None


def _is_abbreviation(before: str) -> bool:
    """The text before a period ends in an abbreviation, an initial, or a list number at a line start."""
    found = _LAST_TOKEN.search(before)
    if found is None:
        return False
    token = found.group(1).lstrip("([\"'\u201c\u2018").lower()
    if token in _ABBREVIATIONS or "." in token:  # "Dr", "e.g", "U.S"
        return True
    if len(token) == 1 and token.isalpha():  # an initial: "J. Doe"
        return True
    line = before[before.rfind("\n") + 1 :].strip()
    return token.isdigit() and line == found.group(1)  # "1. Apples" starting a line


def _soft_cut(text: str, limit: int) -> int:
    """Where to split a long run: after the last comma/semicolon/colon before `limit`, else the last space."""
    head = text[:limit]
    for marks in (",;:", " "):
        at = max(head.rfind(c) for c in marks)
        if at > limit // 3:
            return at + 1
    return limit


def split_sentences(deltas: Iterable[str], max_chars: int = 250) -> Iterator[str]:
    """Yield each sentence of a text stream as soon as it is complete; the unfinished rest at the end."""
    chunker = SentenceChunker(max_chars)
    for delta in deltas:
        yield from chunker.feed(delta)
    rest = chunker.flush()
    if rest:
        yield rest
