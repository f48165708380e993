"""The typed events of one spoken turn (`turn.answer_turn`, `playing.speak_rest`), which `tab.py` turns into page
updates."""

from __future__ import annotations

from dataclasses import dataclass

from fastvlm.speech import Speech, Transcript

from ..widgets import Partial


@dataclass(frozen=True)
class Heard:
    transcript: Transcript
    notice: str | None = None  # a line for the person besides the transcript's own (the question was cut)


@dataclass(frozen=True)
class NotHeard:
    """Nothing was sent to the model; `message` says why (silence, noise, broken audio, no camera frame)."""

    message: str


@dataclass(frozen=True)
class PlaysOn:
    """Speech over the answer had no words (a false interruption): the answer goes on, and `message` says what
    was not heard. `sounding`: its sound was held and plays on (False: none of it had sounded yet)."""

    message: str
    sounding: bool = True


@dataclass(frozen=True)
class StopSaid:
    """The person said only "stop" ("Never mind.", `voice_stop_phrases`): the answer it was said over stays stopped,
    what the page holds of it is dropped, and nothing is asked. `text`: what was heard."""

    text: str


@dataclass(frozen=True)
class SayAgain:
    """The person asked for the answer again ("Say that again?", `voice_repeat_phrases`): it is said again from
    its start. `text`: what was heard; `stt_s`: how long hearing it took."""

    text: str
    stt_s: float = 0.0


@dataclass(frozen=True)
class Answering:
    part: Partial


@dataclass(frozen=True)
class Said:
    """A sentence to play now, after the previous one has finished."""

    speech: Speech
    duration_s: float
    first_sound_s: float | None = None  # the turn's first sentence: seconds from the end of speech to this
    streamed: bool = False  # sent over the page's voice line (played there after the one before), not a file


@dataclass(frozen=True)
class Silent:
    """A sentence could not be spoken by either engine; `reason` says why."""

    reason: str


VoiceEvent = Heard | NotHeard | PlaysOn | StopSaid | SayAgain | Answering | Said | Silent
