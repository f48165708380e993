"""Streamed answer text -> whole sentences, each as soon as it is complete, so speech can start early.

"Dr. Smith", "e.g. this", "3.14", "No. 5", "J. Doe" and "1. item" do not end a sentence; "There are 3. They ..." does.
A sentence ended by a period is released once the next word's first letter shows it is not an abbreviation.

With `first_phrase_words`, an answer's first piece may be a phrase instead of its whole first sentence, so the
voice starts before the model has finished the sentence: "You are holding | a red mug." It ends at a clause mark
(", ; :") or before a word that starts a phrase ("a", "on", "and", ...) once it has that many words and does
not itself end on a word that leaves it hanging ("There is | a dog" is not cut there). Text with no such
boundary ("w76641 w39493 ...", a long name or quoted text) is cut after `first_phrase_max_words` (12) words (fewer
where the last would be left hanging), so the first sound never waits for a long first sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# Terminators, closing quotes/brackets, then whitespace; or a line break (list items, paragraphs).
_BOUNDARY = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+|\n")
_LAST_TOKEN = re.compile(r"(\S+)$")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc approx inc ltd co corp mt cf al dept est ca".split()
)
# Words a finished phrase or question does not end on: articles, prepositions, conjunctions, auxiliaries,
# possessives, question words and fillers (the end-of-turn judge uses them too).
DANGLING = frozenset("""
a an the of on in at to for with from by about into onto behind under over near between like as than
and or nor but yet so because if that whether not is are was were am be been do does did can could will would
should shall may might must has have had my your his her our their what which who whom whose where when why how
um uh er erm hmm mm oh very some any""".split())
# Words that start a phrase: the first piece may end just before one
_STARTERS = frozenset("""
a an the this these those on in at to for with from by about into onto behind under over near next between
and or but because which who where while""".split())
_CLAUSE_MARK = re.compile(r"[,;:]$")
_WORD = re.compile(r"\S+")


class SentenceChunker:
    """Feed text deltas; get back the sentences they complete. `flush()` gives what is left at the end."""

    def __init__(self, max_chars: int = 250, first_phrase_words: int = 0, first_phrase_max_words: int = 12) -> None:
        if max_chars < 20:
            raise ValueError("max_chars must be at least 20")
        if first_phrase_words < 0:
            raise ValueError("first_phrase_words must be 0 (whole sentences) or more")
        if first_phrase_max_words < first_phrase_words:
            raise ValueError("first_phrase_max_words must be at least first_phrase_words")
        self.max_chars = max_chars  # a longer run without a sentence end is split at a comma or a space
        self.first_phrase_words = first_phrase_words  # 0: the first piece is a whole sentence too
        self.first_phrase_max_words = first_phrase_max_words  # no boundary by then: the first phrase ends anyway
        self._buf = ""
        self._first = True  # nothing released yet

    def feed(self, delta: str) -> list[str]:
        self._buf += delta
        sentences = []
        if self._first and self.first_phrase_words and self._next_cut() is None:
            cut = _phrase_cut(self._buf, self.first_phrase_words, self.first_phrase_max_words)
            if cut is not None:
                sentences.append(self._buf[:cut].strip())
                self._buf = self._buf[cut:]
        while (cut := self._next_cut()) is not None:
            sentence, self._buf = self._buf[:cut].strip(), self._buf[cut:]
            if sentence:
                sentences.append(sentence)
        while len(self._buf) > self.max_chars:
            cut = _soft_cut(self._buf, self.max_chars)
            sentences.append(self._buf[:cut].strip())
            self._buf = self._buf[cut:]
        sentences = [s for s in sentences if s]
        self._first = self._first and not sentences
        return sentences

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


def _phrase_cut(text: str, min_words: int, max_words: int) -> int | None:
    """Where `text` (the start of an answer) can end its first phrase, or None: after a clause mark, or before
    a complete word that starts a phrase, with at least `min_words` words before it, the last not dangling;
    failing both, after `max_words` complete words (fewer, down to `min_words`, while the last is dangling)."""
    words = list(_WORD.finditer(text))
    if words and not text[-1:].isspace():
        words.pop()  # the last word may still grow ("a" -> "apple")
    bare = [w.group().strip("\"'([.,;:!?)]").lower() for w in words]
    for k, word in enumerate(words):
        if _CLAUSE_MARK.search(word.group()) and k + 1 >= min(min_words, 2):
            return word.end()
        if k >= min_words and bare[k] in _STARTERS and (not k or bare[k - 1] not in DANGLING):
            return word.start()
    if len(words) <= max_words:
        return None
    k = max_words
    while k > min_words and bare[k - 1] in DANGLING:
        k -= 1
    return words[k].start()


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
