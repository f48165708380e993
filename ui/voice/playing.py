"""Playing a spoken answer's sentences: over the page's voice line each the moment it is synthesized (`LinePush`:
the page plays them one after another), to Gradio's player the next file when the one before has ended
(`speak_rest`). Each is played once, under its queue's lock, whichever thread gets to it first."""

from __future__ import annotations

import time
import wave
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from fastvlm.speech import Speech, SpeechUnavailable

from ..settings import AppSettings
from .events import Said, Silent, VoiceEvent
from .session import VoiceSession
from .speech_queue import SpeechQueue

EDGE_MP3_BITS_PER_S = 48_000  # edge-tts always writes audio-24khz-48kbitrate-mono-mp3 (constant bit rate)


def audio_duration(path: Path) -> float:
    """Seconds of a spoken file: a WAV's frames, or an edge-tts MP3's size at its constant bit rate."""
    if path.suffix.lower() == ".wav":
        with wave.open(str(path), "rb") as w:
            return w.getnframes() / w.getframerate()
    return path.stat().st_size * 8 / EDGE_MP3_BITS_PER_S


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


def due(session: VoiceSession, queue: SpeechQueue, turn: int, settings: AppSettings,
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
