"""When is a spoken question over? A `TurnDetector` plus an end-of-turn rule, and Whisper started early.

Two rules (`SpeechConfig.end_of_turn`):
  silence   the question ends after `end_silence_ms` (700 ms) of silence. Whisper starts at the first pause
            of `early_stt_ms` (300 ms); if that pause is the end, its transcript is used.
  semantic  at every pause of `turn_pause_ms` (120 ms) Whisper transcribes the speech so far and a
            `TurnJudge` says whether the question is finished. Finished: the question ends there once the silence
            has lasted `turn_min_silence_ms` (200 ms). With `likely_events`, `TurnLikelyEnded` comes at the
            verdict (an answer may be begun, not yet played), the end needs `turn_confirm_silence_ms` (550 ms:
            a person who pauses mid-question for 0.5 s goes on before it), and `TurnResumed` comes if the
            person speaks on first (drop what was begun). Not finished: the person is
            waited for, up to `turn_max_silence_ms` (2 s) of silence, the fallback. Unsure ("What is that?": a
            word that often dangles, then "?"): finished, once the silence has lasted `turn_unsure_silence_ms` (1 s).
            A finished question's end waits up to `turn_hold_ms` (150 ms) more while sound has come back in
            the pause's last 0.1 s that the VAD has not yet called speech: it soon says whether the person went on.
            Speech over an answer (`over_answer`, set by the caller) in which Whisper hears no words (a cough,
            "um") ends after the confirming silence instead of the fallback, so the answer goes on ~1.5 s sooner.
            These silences count from where the voice really stopped (Silero hears it stop up to ~60 ms late:
            `TurnDetector.sound_end_s` looks up to 96 ms back) to the last sample fed, not the VAD's windows.
`TurnTaker.feed()` returns the detector's events, with `TurnEnded` (an `UtteranceEnded` that carries the
transcript begun at its pause, if any) for the end, and `HeardSoFar` (the words so far of a question still
spoken, once `want_words` was called: speech/ahead.py); `settle(timeout)` waits for a verdict still being made.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

import numpy as np

from .ahead import WordsAhead
from .audio import RATE, sound_returns
from .config import SpeechConfig
from .judge import TurnJudge, Verdict
from .stt import Transcriber
from .vad import Paused, TurnDetector, TurnEvent, UtteranceEnded
from .vad_stream import VadModel

log = logging.getLogger(__name__)
RULES = ("semantic", "silence")
_RECENT_S = 0.1  # sound this recent may be speech the VAD has not heard yet: a chunk (40 ms) + its lag (<= 64 ms)
_LEAD_S = 0.096  # Silero hears speech stop up to ~60 ms late (bench questions): look this far back for the real end
# ...for blocks this much louder than the pause: a word's fading end in a noisy room counts as voice (at 12 dB,
# in -40 dBFS noise, 2 of the bench's 20 paused questions were cut; at 6 dB none: docs/speech.md)
_LEAD_RISE_DB = 6.0


@dataclass(frozen=True, eq=False)
class TurnEnded(UtteranceEnded):
    """The question is over. `transcript`: a Future of its `Transcript`, begun at the pause that ended it."""

    transcript: Future | None = None
    by: str = "silence"  # silence (the fixed rule) | judge (semantic: finished) | fallback (semantic: max silence)
    # | max_audio (still speaking at `max_audio_s`) | no_words (semantic, `over_answer`: nothing was asked)
    verdict: Verdict | None = None


@dataclass(frozen=True, eq=False)
class TurnLikelyEnded:
    """The judge says the question that paused at `end_s` is finished: it ends there unless the person speaks
    on within `turn_confirm_silence_ms` of silence (`TurnResumed`). Answer it now, play the answer at `TurnEnded`."""

    audio: np.ndarray  # (n,) float32 mono 16 kHz: the speech so far
    start_s: float
    end_s: float  # where the pause began: the `TurnEnded` that confirms it has the same end_s
    transcript: Future  # -> Transcript of `audio`
    verdict: Verdict


@dataclass(frozen=True)
class TurnResumed:
    """The person spoke on after the `TurnLikelyEnded` at `end_s`: whatever was begun for it is not wanted."""

    end_s: float


@dataclass
class _Pause:
    event: Paused
    transcript: Future  # -> Transcript
    verdict: Future | None  # -> Verdict (semantic rule only)
    quiet_from_s: float  # where the sound really stopped: the VAD's `event.end_s` or up to `_LEAD_S` before it
    likely: bool = False  # TurnLikelyEnded was sent for it
    heard: bool = False  # its words were told as the question's so far (not finished: `WordsAhead.at_pause`)


class TurnTaker:
    """One person's turn taking: feed microphone chunks, get `SpeechStarted` and `TurnEnded`."""

    def __init__(self, vad: VadModel, transcriber: Transcriber, config: SpeechConfig | None = None,
                 judge: TurnJudge | None = None, rule: str | None = None, early_stt_ms: int = 300,
                 likely_events: bool = False, onsets: bool = False) -> None:
        """`likely_events`: send `TurnLikelyEnded` / `TurnResumed` (semantic rule) for a caller that answers
        before the end is confirmed; without them the events are those of the detector and `TurnEnded`.
        `onsets`: the detector's `SpeechOnset` too (start preparing the camera frame there)."""
        self.config = config or SpeechConfig()
        self.rule = rule or self.config.end_of_turn
        if self.rule not in RULES:
            raise ValueError(f"unknown end-of-turn rule {self.rule!r}: use one of {', '.join(RULES)}")
        if self.rule == "semantic" and judge is None:
            raise ValueError("the semantic end of turn needs a TurnJudge (fastvlm.speech.judge.load_judge)")
        c = self.config
        semantic = self.rule == "semantic"
        self.detector = TurnDetector(vad, c, end_silence_ms=c.turn_max_silence_ms if semantic else c.end_silence_ms,
                                     pause_ms=c.turn_pause_ms if semantic else early_stt_ms, onsets=onsets)
        self.transcriber, self.judge = transcriber, judge if semantic else None
        self.likely_events = likely_events
        self._end_silence_s = (c.turn_confirm_silence_ms if likely_events else c.turn_min_silence_ms) / 1000
        self._hold_s = c.turn_hold_ms / 1000
        self._no_words_s = c.turn_confirm_silence_ms / 1000
        self._unsure_s = c.turn_unsure_silence_ms / 1000
        self._pause: _Pause | None = None
        self.ahead = WordsAhead(self._transcribe, c.words_ahead_s)
        self.over_answer = False  # the speech going on began over an answer: with no words in it, it ends sooner

    @property
    def pending(self) -> bool:
        """A verdict is still being made for the pause going on."""
        p = self._pause
        return p is not None and p.verdict is not None and not p.verdict.done()

    def feed(self, sample_rate: int, chunk: np.ndarray) -> list[TurnEvent | TurnLikelyEnded | TurnResumed]:
        out: list = []
        for event in self.detector.feed(sample_rate, chunk):
            if isinstance(event, Paused):
                out += self._resumed()
                self._pause = self._start(event)
            elif isinstance(event, UtteranceEnded):
                p, self._pause = self._pause, None
                same = p is not None and p.event.end_s == event.end_s and p.event.start_s == event.start_s
                if p is not None and p.likely and not same:
                    out.append(TurnResumed(p.event.end_s))
                by = "max_audio" if event.truncated else "fallback" if self.judge is not None else "silence"
                out.append(TurnEnded(event.audio, event.start_s, event.end_s, event.truncated,
                                     p.transcript if same else None, by, _done(p.verdict) if same else None))
            else:
                out.append(event)
        p = self._pause
        if p is not None and p.likely and self.detector.silence_s(p.event.end_s) is None:
            out += self._resumed()
        out += self.ahead.step(self.detector, busy=self._pausing())
        return self._ended(out + self._decide())

    def _pausing(self) -> bool:
        """A pause goes on, or its transcript is still being made (words ahead wait: its words are newer)."""
        p = self._pause
        return p is not None and (not p.transcript.done() or self.detector.silence_s(p.event.end_s) is not None)

    def want_words(self, start_s: float) -> None:
        """The frame taken at the first sound of speech at `start_s` (a `SpeechOnset.at_s`) is prepared: hear the
        words of the question that began there (or later: that sound was too short, then came the question) ahead
        (`HeardSoFar`, every `words_ahead_s` of speech) until it ends. Before the last question's end: ignored.
        Any thread may call it."""
        self.ahead.want(start_s)

    def settle(self, timeout_s: float) -> list[TurnEvent | TurnLikelyEnded | TurnResumed]:
        """Wait up to `timeout_s` for the verdict on the pause going on (none: returns at once); the end it
        decides, if any. Call it after every `feed()`: a verdict may have come in since."""
        p = self._pause
        if p is not None and p.verdict is not None and timeout_s > 0:
            wait_futures([p.verdict], timeout_s)
        return self._ended(self._decide())

    def reset(self) -> None:
        self.detector.reset()
        self._pause = None
        self.ahead.reset()
        self.over_answer = False

    def _ended(self, events: list) -> list:
        if any(isinstance(e, TurnEnded) for e in events):
            self.over_answer = False  # the next speech says for itself whether it is over an answer
            self.ahead.reset(max(e.end_s for e in events if isinstance(e, TurnEnded)))
        return events

    def _resumed(self) -> list:
        """The person spoke on: a `TurnLikelyEnded` sent for the pause going on is withdrawn."""
        p, self._pause = self._pause, None
        return [TurnResumed(p.event.end_s)] if p is not None and p.likely else []

    def _decide(self) -> list:
        p = self._pause
        if p is None or p.verdict is None or not p.verdict.done():
            return []
        verdict = _done(p.verdict)
        if verdict is None:  # the judge failed (logged once): the fallback silence decides
            p.verdict = None
            return []
        if self.detector.silence_s(p.event.end_s) is None:
            return []
        silence = self._silence(p)
        if not verdict.complete:
            told = [] if p.heard else self.ahead.at_pause(p.event.start_s, p.transcript)
            p.heard = True
            return told + self._no_words(p, silence, verdict)
        out: list = []
        if self.likely_events and not p.likely:
            p.likely = True
            out.append(TurnLikelyEnded(p.event.audio, p.event.start_s, p.event.end_s, p.transcript, verdict))
        if self._waits(p, silence, self._unsure_s if verdict.unsure else self._end_silence_s):
            return out
        log.debug("end of turn after %.2f s of silence: %s", silence, verdict.reason)
        return out + self._end(p, "judge", verdict)

    def _no_words(self, p: _Pause, silence: float, verdict: Verdict) -> list:
        """Speech over an answer that Whisper heard no words in (nothing, or only "um"s) is over once the silence
        that confirms a question has passed, not the fallback's: a false interruption, after which the answer goes
        on. Any other unfinished question is waited for."""
        if not self.over_answer or not p.transcript.done() or p.transcript.exception() is not None:
            return []
        heard = p.transcript.result()
        if not heard.asks_nothing or self._waits(p, silence, self._no_words_s):
            return []
        log.debug("speech over the answer had no words (%r): over after %.2f s of silence", heard.text, silence)
        return self._end(p, "no_words", verdict)

    def _silence(self, p: _Pause) -> float:
        """Seconds of silence so far in the pause going on: from where the sound really stopped to the last sample
        fed, the few the VAD has not judged yet included (sound coming back there holds the end: `_stirs`)."""
        return self.detector.fed_s - p.quiet_from_s

    def _waits(self, p: _Pause, silence: float, needed_s: float) -> bool:
        """The pause has not lasted `needed_s`, or only just, and sound is coming back (`_stirs`: up to the hold)."""
        return silence < needed_s or (silence < needed_s + self._hold_s and self._stirs(p))

    def _end(self, p: _Pause, by: str, verdict: Verdict) -> list:
        ended = self.detector.end_now(p.event.end_s)
        self._pause = None
        if ended is None:
            return []
        return [TurnEnded(ended.audio, ended.start_s, ended.end_s, False, p.transcript, by, verdict)]

    def _stirs(self, p: _Pause) -> bool:
        """Sound came back in the pause's last `_RECENT_S`: the person may be going on, and the VAD has not
        said so yet (it needs a window or two); the end waits for it, up to `turn_hold_ms`."""
        audio = self.detector.pause_audio(p.event.end_s)
        return audio is not None and sound_returns(audio, round(_RECENT_S * RATE))

    def _transcribe(self, audio: np.ndarray) -> Future:
        """A Future of `audio`'s transcript, made in a thread (words ahead)."""
        transcript: Future = Future()
        threading.Thread(target=_run, args=(transcript, self.transcriber.transcribe, audio), name="turn-ahead",
                         daemon=True).start()
        return transcript

    def _start(self, pause: Paused) -> _Pause:
        """Transcribe the speech so far in a thread; judge it (after the transcript, or beside it)."""
        transcript: Future = Future()
        verdict = None if self.judge is None else Future()
        judge = self.judge

        def hear() -> None:
            _run(transcript, self.transcriber.transcribe, pause.audio)
            if judge is not None and judge.needs_transcript:
                heard = transcript.result() if transcript.exception() is None else None
                _run(verdict, judge.judge, pause.audio, heard)

        threading.Thread(target=hear, name="turn-stt", daemon=True).start()
        if judge is not None and not judge.needs_transcript:
            threading.Thread(target=_run, args=(verdict, judge.judge, pause.audio, None), name="turn-judge",
                             daemon=True).start()
        # only a judged pause counts its silence from where the voice stopped (the fixed rule is the detector's)
        quiet_from = None if verdict is None else self.detector.sound_end_s(pause.end_s, _LEAD_S, _LEAD_RISE_DB)
        return _Pause(pause, transcript, verdict, pause.end_s if quiet_from is None else quiet_from)


def _run(future: Future, fn, *args) -> None:
    try:
        future.set_result(fn(*args))
    except Exception as e:  # noqa: BLE001 - handed to whoever reads the Future
        future.set_exception(e)


def _done(future: Future | None) -> Verdict | None:
    """A finished verdict, or None (none asked, or the judge failed: then the fallback silence decides)."""
    if future is None or not future.done():
        return None
    if future.exception() is not None:
        log.warning("the end-of-turn judge failed; waiting for the fallback silence", exc_info=future.exception())
        return None
    return future.result()
