"""What a short utterance means when it is not a question: "stop", "say that again", or only "okay".

Voice agents people use stop when told to ("Stop.", "Never mind.", "That's enough."), say their answer again when
asked to ("Say that again?", "Pardon?") and talk on over a nod in words ("Okay.", "Yeah.", "Thanks."). Without
this, speech over a spoken answer that Whisper hears words in is the next question: "Stop." would be put to the
model, which answers it about the camera's frame. `intent` reads the transcript: all of it must be such phrases
(hesitation sounds between them allowed), so a question that has "stop" in it ("What does the stop sign say?")
stays a question. English, as Whisper tiny.en hears it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

from .stt import FILLERS

STOP_PHRASES = (
    "stop", "stop it", "stop that", "stop talking", "stop now", "just stop", "cancel", "cancel that", "never mind",
    "nevermind", "enough", "that's enough", "that's it", "that's all", "that'll do", "be quiet", "quiet", "hush",
    "shut up", "silence",
)
ACKNOWLEDGEMENTS = (
    "okay", "ok", "yeah", "yes", "no", "yep", "yup", "right", "alright", "all right", "sure", "i see", "got it", "cool",
    "nice", "great", "wow", "good", "fine", "thanks", "thank you", "please", "sorry",
)
REPEAT_PHRASES = (
    "say that again", "say it again", "repeat", "repeat that", "repeat it", "can you repeat that",
    "could you repeat that", "can you say that again", "could you say that again", "come again", "pardon",
    "pardon me", "what did you say", "one more time",
)
Intent = Literal["ask", "stop", "repeat", "acknowledge"]
_KINDS: tuple[Intent, ...] = ("acknowledge", "repeat", "stop")  # the strongest phrase read names the whole
_WORDS = re.compile(r"[a-z']+")
_SENTENCES = re.compile(r"[.!?…]+\s+")


def words(text: str) -> tuple[str, ...]:
    """"That's enough!" -> ("thats", "enough"): lower case, apostrophes dropped (Whisper writes ’ or ')."""
    return tuple(w.replace("'", "") for w in _WORDS.findall(text.lower().replace("’", "'")) if w.strip("'"))


def intent(text: str, stop_phrases: Iterable[str] = STOP_PHRASES, acknowledgements: Iterable[str] = ACKNOWLEDGEMENTS,
           repeat_phrases: Iterable[str] = REPEAT_PHRASES) -> Intent:
    """"stop" when `text` is only stop phrases, acknowledgements and hesitation sounds, one stop phrase at least
    ("Okay, stop.", "Stop, stop."), or when its last sentence is ("What is on the table? Never mind.": the person
    took the question back); "repeat" when it is only repeat phrases and those ("Sorry, can you say that again?");
    "acknowledge" when only acknowledgements and hesitation sounds ("Oh, okay.", and "Um." alone: it asks nothing
    either); "ask" otherwise, and for no words at all. An empty phrase list turns its kind off."""
    phrases = {(f,): 0 for f in FILLERS} | {words(p): 0 for p in acknowledgements}
    phrases |= {words(p): 1 for p in repeat_phrases} | {words(p): 2 for p in stop_phrases}
    phrases.pop((), None)
    said, last = words(text), words(_SENTENCES.split(text.strip(" .!?…"))[-1])
    read = _read(said, phrases) if said else None
    if read is None:
        return "stop" if last != said and _read(last, phrases) == 2 else "ask"
    return _KINDS[read]


def _read(said: tuple[str, ...], phrases: dict[tuple[str, ...], int]) -> int | None:
    """`said` read as a run of `phrases` (each with the rank of its kind in `_KINDS`): the highest rank among the
    phrases of any reading, or None when it cannot be read so."""
    reach: dict[int, int] = {0: 0}  # words read so far -> the highest rank of a phrase that read some of them
    longest = max(map(len, phrases))  # (the fillers are always there)
    for start in range(len(said)):
        if start not in reach:
            continue
        for n in range(1, min(longest, len(said) - start) + 1):
            rank = phrases.get(said[start:start + n])
            if rank is not None:
                reach[start + n] = max(reach.get(start + n, 0), reach[start], rank)
    return reach.get(len(said))
