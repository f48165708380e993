"""What a short utterance means when it is not a question: "stop", or only "okay" said while the answer plays.

Voice agents people use stop when told to ("Stop.", "Never mind.", "That's enough.") and talk on over a nod in
words ("Okay.", "Yeah.", "Thanks."). Without this, speech over a spoken answer that Whisper hears words in is the
next question: "Stop." would be put to the model, which answers it about the camera's frame. `intent` reads the
transcript: all of it must be such phrases (hesitation sounds between them allowed), so a question that has
"stop" in it ("What does the stop sign say?") stays a question. English, as Whisper tiny.en hears it.
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
    "nice", "great", "wow", "good", "fine", "thanks", "thank you", "please",
)
Intent = Literal["ask", "stop", "acknowledge"]
_WORDS = re.compile(r"[a-z']+")
_SENTENCES = re.compile(r"[.!?…]+\s+")


def words(text: str) -> tuple[str, ...]:
    """"That's enough!" -> ("thats", "enough"): lower case, apostrophes dropped (Whisper writes ’ or ')."""
    return tuple(w.replace("'", "") for w in _WORDS.findall(text.lower().replace("’", "'")) if w.strip("'"))


def intent(text: str, stop_phrases: Iterable[str] = STOP_PHRASES,
           acknowledgements: Iterable[str] = ACKNOWLEDGEMENTS) -> Intent:
    """"stop" when `text` is only stop phrases, acknowledgements and hesitation sounds, one stop phrase at least
    ("Okay, stop.", "Stop, stop."), or when its last sentence is ("What is on the table? Never mind.": the person
    took the question back); "acknowledge" when it is only acknowledgements and hesitation sounds ("Oh, okay.", and
    "Um." alone: it asks nothing either); "ask" otherwise, and for no words at all. Empty phrase lists turn either
    off."""
    phrases = {(f,): False for f in FILLERS} | {words(p): False for p in acknowledgements}
    phrases |= {words(p): True for p in stop_phrases}
    phrases.pop((), None)
    said, last = words(text), words(_SENTENCES.split(text.strip(" .!?…"))[-1])
    read = _read(said, phrases) if said else None
    if read is None:
        return "stop" if last != said and _read(last, phrases) else "ask"
    return "stop" if read else "acknowledge"


def _read(said: tuple[str, ...], phrases: dict[tuple[str, ...], bool]) -> bool | None:
    """`said` read as a run of `phrases` (each True for a stop phrase): whether a stop phrase is among them, or
    None when it cannot be read so."""
    reach: dict[int, bool] = {0: False}  # words read so far -> whether a stop phrase read some of them
    longest = max(map(len, phrases))  # (the fillers are always there)
    for start in range(len(said)):
        if start not in reach:
            continue
        for n in range(1, min(longest, len(said) - start) + 1):
            stop = phrases.get(said[start:start + n])
            if stop is not None:
                reach[start + n] = reach.get(start + n, False) or reach[start] or stop
    return reach.get(len(said))
