"""One spoken turn: transcribe the question, stream the answer, speak each sentence as soon as it is complete.

`answer_turn()` yields typed events (`events.py`) while the engine streams; `playing.speak_rest()` plays the
sentences still left when the engine is already free for others. The answer is cut into a first phrase and then
sentences as its text arrives (in the stream's read-ahead thread), each synthesized by one worker thread per answer
(`SpeechQueue`) and played as `playing.py` says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.events import Done, Event, InputError, Request, TextDelta
from fastvlm.speech import SentenceChunker, Transcriber, Transcript
from fastvlm.speech.audio import RATE
from fastvlm.speech.intent import intent

from ..backend import Backend
from ..settings import AppSettings
from ..widgets import follow
from .continuing import joined, put
from .events import Answering, Heard, NotHeard, PlaysOn, SayAgain, StopSaid, VoiceEvent
from .models import SpeechModels
from .playing import LinePush, due
from .session import TurnTimes, Utterance, VoiceSession
from .speech_queue import SpeechQueue
from .spoken import SpokenAnswer

log = logging.getLogger(__name__)

NO_SPEECH = "No speech heard: speak closer to the microphone, or check that it is not muted."
NO_FRAME = "No camera frame yet: allow the camera (Start turns it on), then ask again."
STT_FAILED = "The question could not be transcribed (details are in the server log). Ask again."
ONLY_FILLERS = "Heard only “{}”: no question was asked. Ask again."
NOTHING_TO_REPEAT = "Nothing was said yet to say again: ask a question first."
CUT = "Only the first {:.0f} s of the question were heard: what you said after that was not. Ask in shorter parts."


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
    if isinstance(heard, (StopSaid, SayAgain)):
        if session.turn == turn:  # (a newer question has its own answer to give)
            yield from _told(engine, models, session, settings, clock, u, heard)
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


def _told(engine: Backend, models: SpeechModels, session: VoiceSession, settings: AppSettings, clock,
          u: Utterance, told: StopSaid | SayAgain) -> Iterator[VoiceEvent]:
    """Told to stop: the answer stopped when this was asked stays so, and its sound goes. Told to say it again: it
    is said again from its start (`SpokenAnswer.again`: going on to its end if this stopped its decode)."""
    log.info("voice turn %d: told %r", session.turn, told.text)
    session.drop_sound()
    if isinstance(told, StopSaid):
        yield told
        return
    latest = session.answer
    chunker, queue = SentenceChunker(first_phrase_words=settings.voice_first_phrase_words), SpeechQueue(models.speaker)
    again = None if latest is None else latest.again(queue, chunker, engine.continues_answers)
    if again is None:
        yield NotHeard(NOTHING_TO_REPEAT)
        return
    session.times = TurnTimes(stt_s=told.stt_s, asked_s=u.asked_at - u.ended_at)
    yield told
    session.playing_until, session.first_sound_from = 0.0, u.ended_at
    session.times.begun_s = clock() - u.ended_at
    yield from _speak(engine, session, settings, clock, again)


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
    yield from due(session, queue, turn, settings, clock)  # what was said before it had a way to the page
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
            yield from due(session, queue, turn, settings, clock)
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


def _meant(heard: Transcript | NotHeard, settings: AppSettings) -> Transcript | NotHeard | StopSaid | SayAgain:
    """Words that only say "stop", "say that again" or only "okay" (asking nothing, as an "um") are no question."""
    if isinstance(heard, NotHeard):
        return heard
    text = heard.text.strip()
    meant = intent(text, settings.voice_stop_phrases, settings.voice_acknowledgements, settings.voice_repeat_phrases)
    if meant == "stop":
        return StopSaid(text)
    if meant == "repeat":
        return SayAgain(text, heard.elapsed_s)
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
