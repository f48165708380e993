"""The page's own audio line for hands-free voice: microphone PCM in, spoken answers out, over one WebSocket.

Gradio's streaming microphone uploads 0.1 s chunks as files and drops those recorded while the previous upload
is pending (17 % of the audio in a measured walk, docs/voice.md), and a spoken answer was fetched as one file per
sentence. The line replaces both for hands-free voice:

  page (link.js)                                   server (this module)
  AudioWorklet: 16-bit PCM, 40 ms frames  ──────►  `VoiceLink.hear` -> the session's turn taker (`listen`)
  clicks #voice-heard-start / #voice-heard-end ◄──  {"type": "start"} / {"type": "ask"}   (Gradio events answer)
                                                   (the question's frame is prepared here, from its first sound)
  stops every sound of turns < n at once       ◄──  {"type": "hush", "turn": n}            (every interrupt)
  holds / plays on what it plays               ◄──  {"type": "pause"} / {"type": "resume"}  (speech over it)
  plays each sentence after the last              ◄── binary: turn, rate, part (uint32 LE) + 16-bit PCM (rate 0: an
                                                      MP3); a sentence in pieces of `PIECE_S`, part 1, 2, …
                                                      following part 0 with no gap
  a turn's sound begins after a silence           ──►  {"type": "sounding", "turn": n}  (times the echo rule)

A line is opened by Start: the Gradio event issues a token for that person's `VoiceSession` (`VoiceLinks.issue`),
and the page connects to `/voice/link` and says hello with it (not in the URL: proxies log URLs). The token is
the only key: it is random, issued only through the page (behind its login when there is one) and dies with the
session. Limits: `LinkLimits`.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import time
import wave
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastvlm.speech import HeardSoFar, SpeechOnset, SpeechStarted
from fastvlm.speech.turn import TurnResumed

from ..settings import AppSettings
from .listening import BargeIn, listen
from .session import VoiceSession

log = logging.getLogger(__name__)

PATH = "/voice/link"
HELLO_S = 5.0  # the page's hello (its token and capture rate) must arrive this soon after the socket opens
RATES = (8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000)  # what a browser's AudioContext may run at
# WebSocket close codes (RFC 6455, 4000+ private) and reasons the page shows
UNKNOWN = (4404, "this voice line is unknown or expired: press Start again")
NO_HELLO = (1008, "the voice line opens with a hello message that carries its token")
BUSY = (1013, "too many voice lines are open on this server: try again later")
TOO_BIG = (1009, "a microphone frame was too large")
TOO_FAST = (1008, "microphone audio arrived faster than real time")
BAD_FRAME = (1003, "the voice line carries 16-bit PCM frames and the page's hello and sounding messages only")
REPLACED = (4000, "this voice line was opened again elsewhere")
PIECE_S = 0.5  # a sentence's sound goes in pieces this long: the page plays the first while the rest arrive


def crowded(lines: int) -> tuple[int, str]:
    """A line refused because its client address already has `lines` open (`LinkLimits.max_lines_per_client`)."""
    return 4429, (f"this address already has {lines} voice lines open: close the app in another tab, "
                  "then press Start again")  # 4429: as HTTP's 429 Too Many Requests


@dataclass(frozen=True)
class LinkLimits:
    """What one page may cost the server through its line."""

    max_lines: int = 64  # open lines at once, all people together (the queue's size)
    # open lines at once from one client address (the one the API judges: behind a trusted proxy, the forwarded
    # one), so one visitor cannot take them all; loopback clients are not counted (one person's tabs here)
    max_lines_per_client: int = 8
    max_tokens: int = 256  # issued tokens kept (the oldest unused one is forgotten first)
    max_frame_s: float = 1.0  # the longest single microphone frame (the page sends 40 ms)
    ahead_s: float = 5.0  # audio may run this far ahead of the wall clock since the line opened
    max_queued_frames: int = 64  # frames waiting to be heard (~2.6 s of 40 ms ones); beyond, the socket waits


class VoiceLink:
    """One page's open line. `hear` runs in a worker thread, one frame at a time; `say`/`hush` may be called from
    any thread. Everything for the page goes to `post` (thread-safe, keeps the order: the server queues it onto
    the event loop that writes the socket)."""

    def __init__(self, session: VoiceSession, settings: AppSettings, post: Callable[[dict | bytes], None],
                 prepare: Callable[..., None] | None = None, client: str | None = None) -> None:
        """`prepare(session, start_s, words="")`: encode and prefill the frame of the question that began at
        `start_s` (in a thread of its own, from the first sound of speech on; again when the question is sure to
        have started, in case the engine was busy), and its `words` heard so far (`HeardSoFar`). `client`: the
        address it counts against for `LinkLimits.max_lines_per_client` (None: not counted)."""
        self.session = session
        self.client = client
        self.settings = settings
        self.barge_in = BargeIn.of(settings) if settings.voice_barge_in else None
        self.prepare = prepare
        self.rate = 16_000
        self.opened = time.monotonic()
        self.heard_s = 0.0
        self.closed = False
        self._post = post

    # -- from the page ---------------------------------------------------------------------------------------
    def told(self, text: str, now: float | None = None) -> tuple[int, str] | None:
        """A message from the page: its hello (the capture rate), or that an answer's sound began after a
        silence (the echo rule's window opens then, not when the server sent it: a slow page plays later).
        None when it is acceptable, else why the line closes."""
        try:
            message = json.loads(text)
            kind = message.get("type", "hello")
        except (ValueError, AttributeError):
            return BAD_FRAME
        if kind == "sounding":
            turn = message.get("turn")
            if not isinstance(turn, int) or isinstance(turn, bool):
                return BAD_FRAME
            self.session.sounding(turn, time.monotonic() if now is None else now)
            return None
        return self.hello(message)

    def hello(self, message: dict) -> tuple[int, str] | None:
        """The page's hello says its capture rate; None when it is acceptable, else why the line closes."""
        if message.get("type", "hello") != "hello":
            return BAD_FRAME
        try:
            rate = int(message.get("rate", 16_000))
        except (ValueError, TypeError):
            return BAD_FRAME
        if rate not in RATES:
            return BAD_FRAME
        self.rate = rate
        return None

    def check(self, data: bytes, limits: LinkLimits, now: float | None = None) -> tuple[int, str] | None:
        """None when `data` may be heard, else (close code, reason)."""
        now = time.monotonic() if now is None else now
        seconds = len(data) / 2 / self.rate
        if len(data) % 2:
            return BAD_FRAME
        if seconds > limits.max_frame_s:
            return TOO_BIG
        if self.heard_s + seconds > now - self.opened + limits.ahead_s:
            return TOO_FAST
        self.heard_s += seconds
        return None

    def hear(self, data: bytes, arrived: float | None = None) -> None:
        """One frame of 16-bit PCM that reached the server at `arrived` (monotonic; None: now): feeds the
        person's turn taker and tells the page what it caused."""
        session = self.session
        samples = np.frombuffer(data, "<i2")  # (n,) int16 mono at self.rate
        asked = session.questions
        try:
            events = listen(session, self.rate, samples, self.settings.voice_echo_margin_s,
                            clock=time.monotonic if arrived is None else lambda: arrived,
                            settle_s=samples.size / self.rate, barge_in=self.barge_in)
        except Exception as e:  # a broken frame: drop it, keep listening (as Gradio's microphone did)
            log.warning("a microphone frame was dropped: %s", e, exc_info=True)
            return
        if self.prepare is not None:
            self._prepare(events)
        if any(isinstance(e, (SpeechStarted, TurnResumed)) for e in events):
            session.phase = "hearing"
            self._send({"type": "start"})
        if session.questions != asked:  # a question to answer (at the judge's verdict, or at its end)
            session.phase = "thinking"
            self._send({"type": "ask"})

    def _prepare(self, events: list) -> None:
        """The frame of a question that began (its words once they are wanted, `HeardSoFar`), in a thread."""
        began = next((e.at_s for e in events if isinstance(e, (SpeechOnset, SpeechStarted))), None)
        calls = [(self.session, began)] if began is not None else []
        calls += [(self.session, e.start_s, e.words) for e in events if isinstance(e, HeardSoFar)]
        for args in calls:
            threading.Thread(target=self.prepare, args=args, name="voice-prepare", daemon=True).start()

    # -- to the page -----------------------------------------------------------------------------------------
    def say(self, path: Path, turn: int) -> bool:
        """Send one spoken sentence (a WAV or MP3 file) to be played after the ones before; False if closed."""
        if self.closed:
            return False
        for message in sound_messages(path, turn):
            self._send(message)
        return True

    def hush(self, turn: int) -> None:
        """Stop every sound of the turns before `turn` at once (a new question, barge-in, Stop)."""
        self._send({"type": "hush", "turn": turn})

    def hold(self, held: bool) -> None:
        """Hold the sound where it is (speech over it, not yet a question), or play on (it ended short of one)."""
        self._send({"type": "pause" if held else "resume"})

    def _send(self, message: dict | bytes) -> None:
        if self.closed:
            return
        try:
            self._post(message)
        except RuntimeError:  # the server's event loop is gone
            self.closed = True

    def close(self) -> None:
        self.closed = True


def sound_messages(path: Path, turn: int, piece_s: float = PIECE_S) -> list[bytes]:
    """A spoken file as the page plays it, each message headed by turn, sample rate and part (uint32 LE each).
    16-bit mono WAV: its raw samples, which the page puts in AudioBuffers as they are (no decode: ~0.1 s less for
    a long sentence on 2 cores), in pieces of `piece_s`, so the first sounds before the rest has arrived (a 13 s
    sentence is 580 KB; over a slow link its first half second is 22 KB). Anything else (edge-tts's MP3): the
    whole file as rate 0, which the page decodes."""
    if path.suffix.lower() == ".wav":
        with wave.open(str(path), "rb") as w:
            if w.getsampwidth() == 2 and w.getnchannels() == 1:
                rate, pcm = w.getframerate(), w.readframes(w.getnframes())
                step = 2 * max(1, int(rate * piece_s))  # bytes per piece
                return [struct.pack("<III", turn, rate, part) + pcm[at:at + step]
                        for part, at in enumerate(range(0, max(1, len(pcm)), step))]
    return [struct.pack("<III", turn, 0, 0) + path.read_bytes()]
