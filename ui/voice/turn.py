"""One spoken turn: transcribe the question, stream the answer, speak each sentence as soon as it is complete.

`answer_turn()` yields typed events while the engine streams; `speak_rest()` plays the sentences still left
when the engine is already free for others. The answer is cut into a first phrase and then sentences as its text
arrives (in the stream's read-ahead thread), each synthesized by one worker thread per answer (`SpeechQueue`).
Over the page's voice line each is sent the moment it is ready (`LinePush`: the page plays them one after
another); to Gradio's player, the next file is sent when the one before has ended.
"""

from __future__ import annotations

import logging
import time
import wave
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.events import Done, Event, InputError, Request, TextDelta
from fastvlm.speech import SentenceChunker, Speech, SpeechUnavailable, Transcriber, Transcript
from fastvlm.speech.audio import RATE
from fastvlm.speech.intent import intent

from ..backend import Backend
from ..settings import AppSettings
from ..widgets import Partial, follow
from .models import SpeechModels
from .continuing import joined, put
from .session import TurnTimes, Utterance, VoiceSession
from .speech_queue import SpeechQueue
from .spoken import SpokenAnswer

log = logging.getLogger(__name__)

NO_SPEECH = "No speech heard: speak closer to the microphone, or check that it is not muted."
NO_FRAME = "No camera frame yet: allow the camera (Start turns it on), then ask again."
STT_FAILED = "The question could not be transcribed (details are in the server log). Ask again."
ONLY_FILLERS = "Heard only “{}”: no question was asked. Ask again."
CUT = "Only the first {:.0f} s of the question were heard: what you said after that was not. Ask in shorter parts."
EDGE_MP3_BITS_PER_S = 48_000  # edge-tts always writes audio-24khz-48kbitrate-mono-mp3 (constant bit rate)


# -- typed events of one spoken turn ----------------------------------------------------------------------------
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


VoiceEvent = Heard | NotHeard | PlaysOn | StopSaid | Answering | Said | Silent


# -- speaking ---------------------------------------------------------------------------------------------------
def audio_duration(path: Path) -> float:
    """Seconds of a spoken file: a WAV's frames, or an edge-tts MP3's size at its constant bit rate."""
    if path.suffix.lower() == ".wav":
        with wave.open(str(path), "rb") as w:
            return w.getnframes() / w.getframerate()
    return path.stat().st_size * 8 / EDGE_MP3_BITS_PER_S


# -- answering ----------------------------------------------------------------------------------------------------
def answer_turn(engine: Backend, models: SpeechModels, session: VoiceSession, settings: AppSettings,
                clock: Callable[[], float] = time.monotonic) -> Iterator[VoiceEvent]:
    """Transcribe the waiting question, stream its answer and speak each sentence as soon as it is complete.
    Sentences still unspoken when the stream ends are left in `session.speech` for `speak_rest()`."""
    u, session.utterance = session.utterance, None
    if u is None:
        return
    turn, session.warned_silent = session.turn, False
    session.transcribing = turn  # until its answer begins (`_speak`), speech over it stops nothing
    try:
        yield from _answer(engine, models, session, settings, clock, joined(u, settings.voice_continue_s), turn)
    finally:
        if session.transcribing == turn:
            session.transcribing = None


def _answer(engine: Backend, models: SpeechModels, session: VoiceSession, settings: AppSettings, clock,
            u: Utterance, turn: int) -> Iterator[VoiceEvent]:
    heard = _meant(_transcribe(models.transcriber, u), settings)
    if isinstance(heard, StopSaid):  # the answer stopped when this was asked: it stays so, and its sound goes
        if session.turn == turn:  # (a newer question has its own answer to give)
            log.info("voice turn %d: told to stop (%r)", turn, heard.text)
            session.drop_sound()
            yield heard
        return
    if isinstance(heard, NotHeard):
        sounding = session.held is not None
        if session.turn == turn and session.go_on(clock()):  # speech over the answer asked nothing: it goes on
            yield PlaysOn(heard.message, sounding)
            yield from _go_on(engine, models, session, settings, clock)
        else:
            yield heard
        return
    if session.held is not None:  # a question over the answer: what the page holds of it is dropped
        session.drop_sound()
    session.times = TurnTimes(stt_s=heard.elapsed_s, asked_s=u.asked_at - u.ended_at)
    asked = put(session, u, heard.text.strip(), settings.voice_history_turns, settings.voice_continue_s)
    heard = replace(heard, text=asked.question)
    yield Heard(heard, CUT.format(u.audio.size / RATE) if u.cut else None)
    if asked.frame is None:
        yield NotHeard(NO_FRAME)
        return
    if session.turn != turn:  # a newer question arrived while this one was transcribed
        return
    session.playing_until, session.first_sound_from = 0.0, u.ended_at  # this answer cuts off an older one
    request = Request(asked.frame, asked.question, asked.history, resolution=settings.camera_resolution,
                      options=GenerationOptions(max_new_tokens=settings.voice_max_new_tokens), image_with_question=True)
    chunker = SentenceChunker(first_phrase_words=settings.voice_first_phrase_words)
    session.times.begun_s = clock() - u.ended_at
    yield from _speak(engine, session, settings, clock, SpokenAnswer(request, chunker, SpeechQueue(models.speaker)))


def _go_on(engine: Backend, models: SpeechModels, session: VoiceSession, settings: AppSettings,
           clock) -> Iterator[VoiceEvent]:
    """The answer that was stopped by speech over it goes on from where it stood (`SpokenAnswer.going_on`)."""
    stopped = session.answer
    rest = None if stopped is None else stopped.going_on(SpeechQueue(models.speaker), engine.continues_answers)
    if rest is None:
        return
    log.info("voice turn %d: the answer goes on after %d characters", session.turn, len(rest.request.answer_so_far))
    yield from _speak(engine, session, settings, clock, rest)


def _speak(engine: Backend, session: VoiceSession, settings: AppSettings, clock,
           answer: SpokenAnswer) -> Iterator[VoiceEvent]:
    """Stream `answer` (unless the engine already ended it) and speak it; sentences left unspoken when the stream
    ends stay in `session.speech`."""
    turn, queue, before = session.turn, answer.queue, answer.request.answer_so_far
    session.speech, session.answer = queue, answer
    if session.transcribing == turn:
        session.transcribing = None  # its answer has begun: speech over it stops it now
    session.push = queue.on_ready = LinePush(session, queue, turn, settings, clock)
    yield from _due(session, queue, turn, settings, clock)  # what was said before it had a way to the page
    if answer.finished:
        queue.finish()
        return
    spoken = _said_aloud(engine.stream(answer.request, cancel=answer.token), answer)  # read ahead: not paced
    parts = follow(spoken, settings.voice_update_s, clock, cancel=answer.token, read_ahead=True)  # by the page
    try:
        for part in parts:
            if session.turn != turn:
                break  # barge-in: closing `parts` stops decoding and frees the engine
            if not before:
                session.times.ttft_s = part.ttft_s
            yield Answering(replace(part, text=before + part.text))
            yield from _due(session, queue, turn, settings, clock)
    finally:
        parts.close()
        queue.finish()
        if session.turn != turn:
            queue.close()


def _said_aloud(events: Iterator[Event], answer: SpokenAnswer) -> Iterator[Event]:
    """The engine's events, each finished phrase or sentence handed to be spoken as soon as its text arrives.
    Closing this closes `events` (decoding stops, the engine is free)."""
    try:
        for event in events:
            if isinstance(event, TextDelta):
                answer.heard(event.text)
            elif isinstance(event, Done) and event.stats.stop_reason != "cancelled":
                answer.ended()
            yield event
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
        answer.settled.set()


def speak_rest(session: VoiceSession, settings: AppSettings, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> Iterator[VoiceEvent]:
    """Play the current answer's remaining sentences one after another, each when the one before has ended."""
    queue, turn = session.speech, session.turn
    while queue is not None and not queue.done and session.turn == turn:
        yield from _told(session)
        if not session.can_send(clock()):  # held until the question's end is confirmed, or still playing
            sleep(0.02 if session.held_end_s is not None else min(session.playing_until - clock(), 0.1))
            continue
        said = _play_next(session, queue, turn, settings, clock, wait_s=0.1)
        if said is not None:
            yield said
    yield from _told(session)


class LinePush:
    """Over an open voice line, a sentence goes to the page the moment it is synthesized (`SpeechQueue`'s
    `on_ready`, in the speech thread) or the moment its question's end is confirmed (`listen`), not at the next
    page update; its `Said` reaches the page with that update (`_told`)."""

    def __init__(self, session: VoiceSession, queue: SpeechQueue, turn: int, settings: AppSettings, clock) -> None:
        self.session, self.queue, self.turn, self.settings, self.clock = session, queue, turn, settings, clock
        self.told: deque[VoiceEvent] = deque()

    def __call__(self) -> None:
        session = self.session
        while session.link is not None and session.turn == self.turn:
            said = _play_next(session, self.queue, self.turn, self.settings, self.clock)
            if said is None:
                return
            self.told.append(said)


def _told(session: VoiceSession) -> Iterator[VoiceEvent]:
    push = session.push
    while isinstance(push, LinePush) and push.told:
        yield push.told.popleft()


def _due(session: VoiceSession, queue: SpeechQueue, turn: int, settings: AppSettings,
         clock) -> Iterator[VoiceEvent]:
    """The sentences that are ready, while nothing is playing."""
    yield from _told(session)
    while (said := _play_next(session, queue, turn, settings, clock)) is not None:
        yield said


def _play_next(session: VoiceSession, queue: SpeechQueue, turn: int, settings: AppSettings, clock,
               wait_s: float = 0.0) -> VoiceEvent | None:
    """The next sentence of the answer of `turn`, played if it is ready within `wait_s` and may be sent now; None
    if not. The wait holds no lock (a new question closing the queue is not kept waiting); the play is under the
    queue's lock: the speech thread, the answer and `speak_rest` never play the same one."""
    if wait_s:
        queue.wait(wait_s)
    with queue.lock:
        item = queue.take() if session.turn == turn and session.can_send(clock()) else None
        return None if item is None else _said(session, item, turn, settings, clock)


def _said(session: VoiceSession, item: Speech | SpeechUnavailable, turn: int, settings: AppSettings,
          clock) -> VoiceEvent:
    if isinstance(item, SpeechUnavailable):
        return Silent(str(item))
    try:
        duration = audio_duration(item.path)
    except (OSError, EOFError, wave.Error) as e:
        item.delete()
        return Silent(f"the spoken file could not be read ({e})")
    first, streamed = session.play(item, duration, clock(), settings.voice_sentence_gap_s, settings.voice_keep_audio,
                                   turn)
    return Said(item, duration, first, streamed)


def _meant(heard: Transcript | NotHeard, settings: AppSettings) -> Transcript | NotHeard | StopSaid:
    """Words that only say "stop", or only "okay" (asking nothing, as an "um"), are not a question."""
    if isinstance(heard, NotHeard):
        return heard
    text = heard.text.strip()
    meant = intent(text, settings.voice_stop_phrases, settings.voice_acknowledgements)
    if meant == "stop":
        return StopSaid(text)
    return NotHeard(ONLY_FILLERS.format(text)) if meant == "acknowledge" else heard


def _transcribe(transcriber: Transcriber, u: Utterance) -> Transcript | NotHeard:
    try:
        transcript = u.early.result() if u.early is not None else transcriber.transcribe(u.audio)
    except InputError as e:
        return NotHeard(str(e))
    except Exception as e:
        log.error("transcription failed", exc_info=e)
        return NotHeard(STT_FAILED)
    if transcript.no_speech or not transcript.text.strip():
        return NotHeard(transcript.notice or NO_SPEECH)
    if transcript.only_fillers:
        return NotHeard(ONLY_FILLERS.format(transcript.text.strip()))
    return transcript
