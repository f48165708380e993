"""Microphone audio into a `VoiceSession`: `listen()` feeds the hands-free line's chunks to the turn taker and lets
speech over a playing answer stop it (`BargeIn`); `record()` takes a push-to-talk recording as the question."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fastvlm.speech import SpeechOnset, SpeechStarted, TurnDetector, TurnEvent, UtteranceEnded, to_mono_16k
from fastvlm.speech.turn import TurnLikelyEnded, TurnResumed

from ..settings import AppSettings
from .session import VoiceSession


@dataclass(frozen=True)
class BargeIn:
    """Speech over a playing answer stops it and is the next question (echo cancellation keeps the answer out)."""

    hold_s: float | None = None  # this much speech holds the answer's sound before it is a question (None: only a
    # question stops it)
    echo_settle_s: float = 0.0  # speech that begins this near the answer's sound starting or ending (the canceller
    echo_speech_ms: int = 0  # lets a burst of it through, docs/voice.md) must last this long to stop it
    resume_s: float = 0.2  # held speech that ends short of a question (a cough): the sound goes on after this quiet

    @classmethod
    def of(cls, settings: AppSettings) -> BargeIn:
        return cls(settings.voice_barge_in_ms / 1000, settings.voice_echo_settle_s, settings.voice_echo_speech_ms,
                   settings.voice_resume_s)


def listen(session: VoiceSession, sample_rate: int, chunk: np.ndarray, echo_margin_s: float,
           clock: Callable[[], float] = time.monotonic, settle_s: float = 0.0,
           barge_in: BargeIn | None = None) -> list[TurnEvent]:
    """One microphone chunk -> the turn events it caused. While the app's own answer plays: deaf, or with
    `barge_in` speech stops the answer and is the next question (`barge_ins` counts them).

    The turn taker transcribes the question from its pauses on; when a verdict on the pause going on is still
    being made, it is waited for up to `settle_s` (the page holds the next chunks meanwhile, none is lost)."""
    taker = session.taker
    if not session.listening or taker is None or np.size(chunk) == 0:
        return []
    now = clock()
    d = taker.detector
    playing = now < session.playing_until + echo_margin_s
    deaf = playing and barge_in is None
    if deaf and not d.muted:
        d.mute()  # drops any half-heard utterance: it was the app's own voice
    elif not deaf and d.muted:
        d.unmute()
    b = barge_in
    echo_window = b is not None and (session.opening(now, b.echo_settle_s) or session.closing(now, b.echo_settle_s))
    d.strict_ms = b.echo_speech_ms if playing and echo_window else None
    fed_s = d.fed_s
    events = taker.feed(sample_rate, chunk) + taker.settle(settle_s)  # the detector resamples its stream
    session.chunks += 1
    session.heard_s += d.fed_s - fed_s

    for event in events:
        _on_event(session, event, playing, now, barge_in)
    if b is not None and b.hold_s is not None and session.link is not None:
        _hold_or_release(session, d, b, playing, now)
    return events


def _on_event(session: VoiceSession, event: TurnEvent, playing: bool, now: float, b: BargeIn | None) -> None:
    """What one turn event does to the session: the question's frame, speech over the answer, asking, confirming."""
    taker = session.taker

    def ended_at(end_s: float) -> float:  # the end was known only after some silence
        return now - (session.heard_s - end_s)

    if isinstance(event, SpeechOnset):  # the frame of the moment the person began (maybe only a cough)
        session.question_frame = session.frame
    elif isinstance(event, SpeechStarted):
        if session.question_frame is None or not taker.detector.onsets:
            session.question_frame = session.frame
        session.starts += 1
        session.over_waiting = session.awaiting and not playing  # its answer not begun: nothing to stop
        if session.over_waiting:  # with no words, the speech is over sooner and its answer comes (UtteranceEnded)
            taker.over_answer = True
            return
        taker.over_answer = playing or (session.speech is not None and not session.speech.done)
        if taker.over_answer:  # with no words, it is over sooner (turn.TurnTaker) and the answer goes on
            if playing and session.held is None and b is not None and b.hold_s is not None:
                session.hold_sound(now)  # it began to sound while the person was already speaking
            session.question_over_sound()  # a held sound waits for the question's words
            session.barge_ins, session.playing_until = session.barge_ins + 1, 0.0
        session.interrupt()  # the person talks over the answer: it stops at its next token, says no more
    elif isinstance(event, TurnLikelyEnded):  # answered now, heard once the end is confirmed
        session.ask(event.audio, ended_at(event.end_s), event.transcript, event.end_s,
                    span=(event.start_s, event.end_s))
    elif isinstance(event, TurnResumed):
        session.resume(event.end_s)
    elif isinstance(event, UtteranceEnded):
        over_waiting, session.over_waiting = session.over_waiting, False
        if over_waiting and getattr(event, "by", None) == "no_words":  # a cough while a question waited for
            session.play_on(now)  # its answer: nothing was asked, that answer comes (a sound held meanwhile too)
        elif not session.confirm(event.end_s):
            session.ask(event.audio, ended_at(event.end_s), getattr(event, "transcript", None), cut=event.truncated,
                        span=(event.start_s, event.end_s))
        elif session.push is not None:
            session.push()  # what is ready of the answer begun at the verdict sounds now


def _hold_or_release(session: VoiceSession, d: TurnDetector, b: BargeIn, playing: bool, now: float) -> None:
    """Speech over a playing answer holds its sound at once (`hold_s` of it; in the echo window, as long as a
    question needs elsewhere, `min_speech_ms`: the canceller's bursts there are shorter). If it becomes a question,
    the question's words decide (`answer_turn`: dropped, or played on when there were none); if it ends short of
    one, the sound goes on from where it was held after `resume_s` of quiet."""
    held = session.held
    if held is None:
        hold_s = d.config.min_speech_ms / 1000 if d.onset_strict else b.hold_s
        if playing and d.onset_s >= hold_s:
            session.hold_sound(now)
        return
    if held.until is not None:  # a question: its words decide
        return
    if d.onset_s > 0:  # still speech, not yet a question
        held.quiet_from = None
    elif held.quiet_from is None:
        held.quiet_from = session.heard_s
    elif session.heard_s - held.quiet_from >= b.resume_s:
        session.play_on(now)


def record(session: VoiceSession, sample_rate: int, samples: np.ndarray, clock=time.monotonic) -> None:
    """A push-to-talk recording becomes the question. Raises InputError for broken or empty audio."""
    session.ask(to_mono_16k(sample_rate, samples), clock())
