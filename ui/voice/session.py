"""One person's spoken conversation with the camera.

`VoiceSession` (in `gr.State`) holds one person's turn taker (VAD + end-of-turn rule), latest camera frame,
the question waiting for an answer and what is being spoken; `listening.py` feeds it microphone audio, `turn.py`
answers its questions, `tab.py` is the layout. The speech models everyone shares are `models.SpeechModels`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fastvlm.engine.prompt import Turn
from fastvlm.speech import (
    Speech,
    TurnTaker,
)

from ..settings import CONTINUE_MAX_S

if TYPE_CHECKING:
    from .speech_queue import SpeechQueue
    from .spoken import SpokenAnswer

log = logging.getLogger(__name__)


# -- one person's state -----------------------------------------------------------------------------------------
class PageLine(Protocol):
    """The page's own audio line while it is open (`ui.voice.link.VoiceLink`)."""

    def say(self, path: Path, turn: int) -> bool:
        """Send a spoken sentence to play after the ones before; False when the line is closed."""
        ...

    def hush(self, turn: int) -> None:
        """Stop every sound of the turns before `turn` at once (a held sound too)."""
        ...

    def hold(self, held: bool) -> None:
        """Hold what plays where it is (someone may be speaking over it), or play on; a hush drops what is held."""
        ...

    def close(self) -> None: ...


@dataclass
class TurnTimes:
    """How long the current turn's stages took, for the page and the log (None: not yet)."""

    stt_s: float | None = None
    ttft_s: float | None = None
    first_sound_s: float | None = None  # end of speech -> the first sentence sent to play
    asked_s: float | None = None  # end of speech -> the question known (the judge's verdict, or its end)
    begun_s: float | None = None  # end of speech -> the engine asked (after the page's Gradio round trip)

    def timeline(self) -> str:
        """'question known 0.41 s after the end of speech, engine asked 0.45 s, first token 0.66 s, first sound
        sent 0.95 s (STT 0.30 s)': where a slow first sound lost its time."""
        token = None if self.begun_s is None or self.ttft_s is None else self.begun_s + self.ttft_s
        return (f"question known {_secs(self.asked_s)} after the end of speech, engine asked {_secs(self.begun_s)}, "
                f"first token {_secs(token)}, first sound sent {_secs(self.first_sound_s)} (STT {_secs(self.stt_s)})")


def _secs(t: float | None) -> str:
    return "?" if t is None else f"{t:.2f} s"


@dataclass
class HeldSound:
    """The page holds the answer's sound where it stands: someone is speaking over it."""

    at: float  # monotonic time the page was told to hold it
    quiet_from: float | None = None  # `heard_s` when the speech over it stopped short of a question
    until: float | None = None  # the speech became a question: when the sound would have ended (its words decide
    # whether it is dropped or plays on, `answer_turn`; meanwhile `playing_until` is 0)


@dataclass
class Utterance:
    audio: np.ndarray  # (n,) float32 mono 16 kHz
    frame: np.ndarray | None  # the camera frame taken when the person started speaking
    ended_at: float  # monotonic time the speech ended (hands-free: the detector's end, not its decision)
    early: Future | None = None  # its transcript, begun at the pause that ended it (see `listen`)
    asked_at: float = field(default_factory=time.monotonic)  # monotonic time it became the question
    cut: bool = False  # still spoken at `max_audio_s`: only that much of it is the question
    span: tuple[float, float] | None = None  # hands-free: its speech's start and end, seconds of the detector's stream
    replaced: Utterance | None = None  # the question asked just before it and not yet taken up (`turn.joined`)


@dataclass(frozen=True)
class Asked:
    """A question as it was put to the model (hands-free), for a question spoken on right after it."""

    question: str
    history: tuple[Turn, ...]
    frame: np.ndarray | None
    start_s: float  # its own speech, seconds of the detector's stream
    end_s: float
    before: Asked | None = None  # the question it went on from


@dataclass
class VoiceSession:
    """Lives in `gr.State`: must deep-copy as created, so the detector (it holds the VAD model) comes later."""

    listening: bool = False
    taker: TurnTaker | None = None  # when a question starts and ends; transcribes it from its pauses on
    heard_s: float = 0.0  # microphone audio fed since listening started
    chunks: int = 0
    frame: np.ndarray | None = None  # the webcam's latest frame
    question_frame: np.ndarray | None = None  # taken when speech started
    starts: int = 0  # speech starts heard: bumped to prepare the question's frame
    questions: int = 0  # questions heard: bumped to answer `utterance`
    utterance: Utterance | None = None
    turn: int = 0  # bumped by every new question, Stop and push-to-talk: an older answer stops at its next token
    speech: SpeechQueue | None = None
    answer: SpokenAnswer | None = None  # the latest answer, as far as it was decoded and spoken
    barge_ins: int = 0  # answers cut off by the person speaking over them: the page stops the audio at once
    playing_until: float = 0.0  # monotonic time the audio sent so far has finished playing
    sound_from: float = float("-inf")  # monotonic time the answer's sound last began after a silence
    held: HeldSound | None = None  # the page holds the answer's sound (speech over it)
    first_sound_from: float | None = None  # the current turn's end of speech, until its first sentence plays
    files: list[Path] = field(default_factory=list)  # spoken answer files, oldest first
    phase: str = "ready"  # what the page says: ready, listening, hearing, thinking, speaking
    times: TurnTimes = field(default_factory=TurnTimes)
    warned_silent: bool = False  # this turn already said why there is no sound
    link: PageLine | None = None  # the page's own audio line (hands-free), while it is open
    link_token: str | None = None  # the key the page opens it with (`VoiceLinks.issue`)
    line_refused: str | None = None  # why the server refused the line this token opened (the page is told after Start)
    held_end_s: float | None = None  # a question answered at the judge's verdict: its speech waits for the end
    push: Callable[[], None] | None = None  # sends the answer's sentences that are ready over the line (playing.py)
    transcribing: int | None = None  # the turn whose question `answer_turn` took and has not begun to answer
    asked: Asked | None = None  # the latest question put to the model, hands-free
    over_waiting: bool = False  # the speech going on began while a question waited for its answer (`awaiting`)

    @property
    def awaiting(self) -> bool:
        """A question was asked and its answer has not begun (not yet taken by `answer_turn`, or being transcribed
        there): speech now stops nothing, and with no words in it lets that answer come (`listening`)."""
        return self.utterance is not None or (self.transcribing is not None and self.transcribing == self.turn)

    def listen(self, taker: TurnTaker) -> None:
        self.listening, self.taker = True, taker
        self.heard_s, self.chunks, self.asked = 0.0, 0, None  # a new detector: its stream's clock starts again

    def stop(self) -> None:
        """Stop listening and speaking; the conversation ends (the next question starts a new one)."""
        self.listening = False
        self.interrupt(drop_held=True)
        self.playing_until, self.question_frame = 0.0, None
        self.answer, self.asked = None, None

    def conversation(self, keep: int) -> tuple[Turn, ...]:
        """The turns the next question follows: the latest answer's own (the turns it followed), then its question
        and its words as far as they were decoded (an answer cut off by that question too). The window moves
        `keep` turns at a time: at least the last `keep` (all there are, when fewer), at most 2·`keep` − 1, so
        that from one question to the next the turns before the frame stay the same and only the newest is
        prefilled (`Request.image_with_question`), save once every `keep` questions."""
        latest = self.answer
        if latest is None or keep <= 0:
            return ()
        turns = latest.request.history
        if latest.words.strip():
            turns += (Turn(latest.request.question, latest.words),)
        return turns[len(turns) - keep:] if len(turns) >= 2 * keep else turns

    def interrupt(self, drop_held: bool = False) -> None:
        """A new question or Stop: the running answer stops at its next token and says no more. What the page
        has of it is dropped too, unless it is held for a question whose words are not known yet (and not
        `drop_held`: Stop, push to talk)."""
        self.turn += 1
        self.held_end_s = None
        if self.answer is not None:
            self.answer.stop()
        if self.speech is not None:
            self.speech.close()
        if drop_held or self.held is None or self.held.until is None:
            self.drop_sound()

    def drop_sound(self) -> None:
        """The page stops every sound of the turns before this one at once, a held one too."""
        self.held = None
        if self.link is not None:
            self.link.hush(self.turn)
            self.playing_until = 0.0

    def hold_sound(self, now: float) -> None:
        """Someone speaks over the answer: the page holds its sound where it stands."""
        if self.link is not None:
            self.link.hold(True)
            self.held = HeldSound(now)

    def question_over_sound(self) -> None:
        """Speech over the answer (sounding, or still being made) became a question: a held sound waits for its
        words (no words: it was a false interruption, `go_on`; words: `drop_sound`)."""
        if self.held is not None:
            self.held.until = self.playing_until
        if self.answer is not None:
            self.answer.spoken_over = True

    def go_on(self, now: float) -> bool:
        """Speech over the answer asked nothing: True if the answer goes on, because its held sound plays on or
        none of it had sounded yet (over the page's line)."""
        return self.play_on(now) or (self.link is not None and self.answer is not None and self.answer.unheard_cut)

    def play_on(self, now: float) -> bool:
        """The held sound goes on from where it stood; False if none was held."""
        held, self.held = self.held, None
        if held is None or self.link is None:
            return False
        self.link.hold(False)
        until = self.playing_until if held.until is None else held.until
        self.playing_until = until + now - held.at  # the page's clock stood still meanwhile
        return True

    def ask(self, audio: np.ndarray, ended_at: float, early: Future | None = None,
            held_end_s: float | None = None, cut: bool = False, span: tuple[float, float] | None = None) -> None:
        """`audio` is the next question, about the frame taken when it began (or the latest one). `held_end_s`:
        it is answered before its end is confirmed; nothing is said until `confirm`, `resume` drops it. `cut`:
        the person was still speaking at `max_audio_s`."""
        self.interrupt()
        frame = self.question_frame if self.question_frame is not None else self.frame
        pending = self.utterance  # asked and not taken up yet (the engine busy with others): it may go on in this one
        if pending is None or pending.span is None or span is None or span[0] - pending.span[1] > CONTINUE_MAX_S:
            pending = None
        self.utterance = Utterance(audio, frame, ended_at, early, cut=cut, span=span, replaced=pending)
        # a question answered at the verdict may go on (`resume`): all of it is about the frame it began with
        self.question_frame = frame if held_end_s is not None else None
        self.held_end_s = held_end_s
        self.questions += 1

    def confirm(self, end_s: float) -> bool:
        """The question held at `end_s` has ended: its answer may sound. False if no such question is held."""
        if self.held_end_s is None or self.held_end_s != end_s:
            return False
        self.held_end_s, self.question_frame = None, None
        return True

    def resume(self, end_s: float) -> None:
        """The person spoke on after the pause at `end_s`: the answer begun for it stops, unheard."""
        if self.held_end_s == end_s:  # not taken up yet: what it replaced is the question waiting again
            self.utterance = None if self.utterance is None else self.utterance.replaced
            self.interrupt()

    def sounding(self, turn: int, now: float) -> None:
        """The page says the answer of `turn` began to sound after a silence, now: the echo rule's window opens
        here (`play` opened it when the sentence was sent, which is earlier on a slow page)."""
        if turn == self.turn:
            self.sound_from = now

    def opening(self, at: float, settle_s: float) -> bool:
        """`at` (monotonic) is within `settle_s` of the answer's sound beginning after a silence."""
        return self.sound_from <= at <= self.sound_from + settle_s

    def closing(self, at: float, settle_s: float) -> bool:
        """`at` (monotonic) is within `settle_s` either side of where the sound sent so far ends: there the room's
        reverberation outlasts what the canceller cancels, and it lets a burst of the last word through too."""
        return abs(at - self.playing_until) <= settle_s

    def speech_over(self, margin_s: float, now: float | None = None) -> bool:
        """The answer has been spoken to its end, `margin_s` ago."""
        now = time.monotonic() if now is None else now
        return now >= self.playing_until + margin_s and (self.speech is None or self.speech.done)

    def can_send(self, now: float) -> bool:
        """A sentence may be sent to the page now: over the line at once (the page plays them one after another),
        to Gradio's player only when the one before has finished."""
        return self.held_end_s is None and (self.link is not None or now >= self.playing_until)

    def play(self, speech: Speech, duration_s: float, now: float, gap_s: float, keep: int,
             turn: int | None = None) -> tuple[float | None, bool]:
        """`speech`, of the answer of `turn` (default: the current one), is sent to play: (seconds since the end of
        speech if it is the turn's first, sent over the line)."""
        first = None if self.first_sound_from is None else now - self.first_sound_from
        if first is not None:
            self.times.first_sound_s, self.first_sound_from = first, None
            log.debug("voice turn %d: %s", self.turn, self.times.timeline())
        if now >= self.playing_until:  # nothing plays: this sentence starts the sound again
            self.sound_from = now
        streamed = self.link is not None and self.link.say(speech.path, self.turn if turn is None else turn)
        self.playing_until = (max(now, self.playing_until) if streamed else now) + duration_s + gap_s
        if streamed:
            speech.delete()  # the page has its bytes
            return first, True
        self.files.append(speech.path)
        while len(self.files) > keep:  # Gradio has its own copy of each file it sent
            self.files.pop(0).unlink(missing_ok=True)
        return first, False

    def close(self) -> None:
        """The person left (gr.State's delete callback): stop, close the line, delete their audio files."""
        self.stop()
        if self.link is not None:
            self.link.close()
        for path in self.files:
            path.unlink(missing_ok=True)
        self.files.clear()
