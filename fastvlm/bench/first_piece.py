"""Where the voice benches cut a random-weight answer's first spoken piece: at the token where the app's chunker
would release the first piece of `REFERENCE_ANSWER` (random weights never end a phrase or a sentence)."""

from __future__ import annotations

# About as Qwen2 tokenizes a typical first answer: a word or a mark a token
REFERENCE_ANSWER = (" You", " are", " holding", " a", " red", " mug", ".", " It", " looks", " full", ".")


def first_piece_tokens(first_phrase_words: int) -> int:
    """The token at which the app's chunker releases `REFERENCE_ANSWER`'s first spoken piece: 8 for the whole
    sentence (" It" shows that the period ends it), 5 with phrases ("You are holding" once " a" is complete)."""
    return first_piece(first_phrase_words)[0]


def first_piece(first_phrase_words: int) -> tuple[int, str]:
    """(`first_piece_tokens`, the words of that piece)."""
    from ..speech import SentenceChunker

    chunker = SentenceChunker(first_phrase_words=first_phrase_words)
    for n, token in enumerate(REFERENCE_ANSWER, 1):
        if pieces := chunker.feed(token):
            return n, pieces[0]
    return len(REFERENCE_ANSWER), "".join(REFERENCE_ANSWER).strip()
