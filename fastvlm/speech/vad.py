"""End of a spoken question in a streamed microphone, with the Silero VAD that faster-whisper ships.

`TurnDetector.feed(sample_rate, chunk)` returns the events that chunk caused: `SpeechOnset` at the first
window of speech (grab the camera frame, start preparing the image), `SpeechStarted` once it has lasted
`min_speech_ms` (a question, not a cough: stop an answer that is playing), with `pause_ms` set `Paused` at each
pause of that length inside the speech (the utterance so far: judge or transcribe it while the person may go
on), and after `end_silence_ms` of silence `UtteranceEnded` with the question's audio; `end_now()` ends the
utterance early, in a pause, when something else decided the question is over (`fastvlm.speech.turn`).
Speech longer than `max_audio_s` ends there (`truncated`); what follows without `end_silence_ms` of silence is
its tail, never a new question.
Each browser session keeps its own detector; the Silero model is shared (its recurrent state lives in the
detector's `vad_stream.VadStream`, so nothing leaks between sessions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .audio import RATE, StreamResampler, sound_ended
from .config import SpeechConfig
from .vad_stream import WINDOW, VadModel, VadStream


@dataclass(frozen=True)
class SpeechOnset:
    """The first window that sounds like speech: it may still turn out a cough (no `SpeechStarted` follows).
    Cheap, undoable work can begin here (the camera frame's encode and prefill), 250 ms before `SpeechStarted`."""

    at_s: float


@dataclass(frozen=True)
class SpeechStarted:
    at_s: float  # where the speech began, in seconds of audio fed since the last reset()


@dataclass(frozen=True, eq=False)
class UtteranceEnded:
    audio: np.ndarray  # (n,) float32 mono 16 kHz: the speech with `speech_pad_ms` either side
    start_s: float  # speech start, seconds since reset()
    end_s: float  # speech end (where the silence began)
    truncated: bool = False  # still speaking when the audio reached `max_audio_s`: cut there


@dataclass(frozen=True, eq=False)
class Paused:
    """`pause_ms` of silence inside an utterance that goes on (it may still end here)."""

    audio: np.ndarray  # (n,) float32 mono 16 kHz: the speech so far, with the padding heard so far
    start_s: float  # speech start, seconds since reset()
    end_s: float  # where this pause began


TurnEvent = SpeechOnset | SpeechStarted | Paused | UtteranceEnded


@dataclass
class _Utterance:
    start: int  # first speech window, in 16 kHz samples since reset
    min_speech: int  # samples of speech that make it a question (`SpeechStarted`)
    silence_from: int | None = None  # first window of the current run of silence
    started: bool = False  # SpeechStarted was sent
    paused: bool = False  # Paused was sent for the current run of silence


@dataclass
class _Stream:
    """Per-session audio state."""

    vad: VadStream  # the VAD's probabilities and state (`vad_stream`: digital silence, restarts)
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # < 1 window, not yet judged
    audio: list[np.ndarray] = field(default_factory=list)  # recent 16 kHz audio (pre-roll + utterance)
    audio_from: int = 0  # sample index of audio[0][0]
    utterance: _Utterance | None = None
    overflow: bool = False  # an utterance was cut at `max_audio_s`: the speech going on is its tail, not a question
    quiet_from: int | None = None  # in the overflow: first window of the current run of silence


class TurnDetector:
    """Finds where a spoken question starts and ends in successive microphone chunks."""

    def __init__(self, vad: VadModel, config: SpeechConfig | None = None, *, end_silence_ms: int | None = None,
                 pause_ms: int = 0, onsets: bool = False) -> None:
        """`end_silence_ms` (default `config.end_silence_ms`) ends an utterance; `pause_ms` (0: never) of silence
        inside one sends `Paused` once per run of silence; `onsets`: send `SpeechOnset` too."""
        self.vad = vad
        self.onsets = onsets
        self.config = config or SpeechConfig()
        ms = RATE // 1000
        end_silence_ms = self.config.end_silence_ms if end_silence_ms is None else end_silence_ms
        if pause_ms and not 32 <= pause_ms < end_silence_ms:
            raise ValueError(f"pause_ms must be 0 (off) or in 32..{end_silence_ms - 1} (below the end silence)")
        self._min_speech = self.config.min_speech_ms * ms
        # speech that begins while this is set needs at least this many ms to be a question (`SpeechStarted`),
        # e.g. while the app's own voice may still leak through the browser's echo canceller
        self.strict_ms: int | None = None
        self._end_silence = end_silence_ms * ms
        self._pause = pause_ms * ms
        self._pad = self.config.speech_pad_ms * ms
        self._max = int(self.config.max_audio_s * RATE)
        self._threshold = self.config.vad_threshold
        self._neg_threshold = max(self._threshold - 0.15, 0.01)  # as faster-whisper's get_speech_timestamps
        self.reset()

    def reset(self) -> None:
        """Forget everything heard and unmute; stream time restarts at 0."""
        self._fed = 0  # 16 kHz samples fed since reset, muted ones included
        self._to_16k = StreamResampler()  # the stream's chunks resampled as one signal
        self._muted_until: float | None = None  # in samples; inf: until unmute()
        self._s = _Stream(VadStream(self.vad))

    # --- muting: what the app says itself is not a question ---
    @property
    def muted(self) -> bool:
        if self._muted_until is not None and self._fed >= self._muted_until:
            self._muted_until = None
        return self._muted_until is not None

    def mute(self, for_s: float | None = None) -> None:
        """Ignore audio until `unmute()`, or for `for_s` seconds of fed audio. Drops any utterance in progress."""
        self._muted_until = float("inf") if for_s is None else self._fed + for_s * RATE
        self._s = _Stream(VadStream(self.vad), audio_from=self._fed)

    def unmute(self) -> None:
        self._muted_until = None

    # --- listening ---
    def feed(self, sample_rate: int, chunk: np.ndarray) -> list[TurnEvent]:
        """One microphone chunk (any rate, PCM or float, mono or stereo) -> the events it caused."""
        if np.size(chunk) == 0:  # browsers send empty chunks now and then
            return []
        audio = self._to_16k(sample_rate, chunk)
        if self.muted:
            self._fed += audio.size
            self._s.audio_from = self._fed  # nothing kept while muted: the next audio starts here
            return []
        s = self._s
        s.audio.append(audio)
        samples = np.concatenate([s.pending, audio])
        n = samples.size // WINDOW
        s.pending = samples[n * WINDOW :]
        first = self._fed - (samples.size - audio.size)  # stream index of samples[0]
        self._fed += audio.size
        if n == 0:
            return []
        windows = samples[: n * WINDOW].reshape(n, WINDOW)
        probs = s.vad.probabilities(windows, in_utterance=s.utterance is not None)
        events: list[TurnEvent] = []
        for i, p in enumerate(probs):
            at, idle = first + i * WINDOW, s.utterance is None
            event = self._step(float(p), at)
            if self.onsets and idle and s.utterance is not None:
                events.append(SpeechOnset(at / RATE))
            if event is not None:
                events.append(event)
        self._trim()
        return events

    def _step(self, p: float, at: int) -> TurnEvent | None:
        """Advance by one window that starts at sample `at` with speech probability `p`."""
        u = self._s.utterance
        if u is None and self._s.overflow:
            self._overflowing(p, at)
            return None
        if u is None:
            if p >= self._threshold:
                min_speech = max(self._min_speech, (self.strict_ms or 0) * RATE // 1000)
                self._s.utterance = u = _Utterance(at, min_speech)
            else:
                return None
        if p >= self._threshold:
            u.silence_from, u.paused = None, False
        elif p < self._neg_threshold and u.silence_from is None:
            u.silence_from = at
        end = at + WINDOW
        if not u.started:
            if u.silence_from is not None:  # too short: a click or a cough
                self._s.utterance = None
            elif end - u.start >= u.min_speech:
                u.started = True
                return SpeechStarted(u.start / RATE)
            return None
        if u.silence_from is not None and end - u.silence_from >= self._end_silence:
            return self._finish(u.silence_from, truncated=False)
        if self._pause and u.silence_from is not None and not u.paused and end - u.silence_from >= self._pause:
            u.paused = True
            lo, hi = self._bounds(u.start, u.silence_from)
            return Paused(np.concatenate(self._s.audio)[lo:hi].copy(), u.start / RATE, u.silence_from / RATE)
        if end - u.start >= self._max - self._pad:  # the audio with its lead-in stays within max_audio_s
            self._s.overflow, self._s.quiet_from = True, u.silence_from
            return self._finish(end, truncated=True)
        return None

    def _overflowing(self, p: float, at: int) -> None:
        """Speech that goes on past a question cut at `max_audio_s` is that question's tail: no new question starts
        (it would stop the first and be asked alone) until the silence that ends an utterance has passed."""
        s = self._s
        if p >= self._threshold:
            s.quiet_from = None
        elif p < self._neg_threshold and s.quiet_from is None:
            s.quiet_from = at
        if s.quiet_from is not None and at + WINDOW - s.quiet_from >= self._end_silence:
            s.overflow, s.quiet_from = False, None

    @property
    def fed_s(self) -> float:
        """Seconds of 16 kHz audio fed since reset (muted ones included)."""
        return self._fed / RATE

    @property
    def onset_s(self) -> float:
        """Seconds of speech heard so far that have not yet made a `SpeechStarted` (0: none)."""
        u = self._s.utterance
        return 0.0 if u is None or u.started else max(0.0, (self._fed - u.start) / RATE)

    @property
    def onset_strict(self) -> bool:
        """The speech being heard began while `strict_ms` asked for more than `min_speech_ms`."""
        u = self._s.utterance
        return u is not None and u.min_speech > self._min_speech

    def speaking(self) -> tuple[float, float] | None:
        """(start s, seconds since then) of the question being spoken: started, and not in a pause; else None."""
        u = self._s.utterance
        if u is None or not u.started or u.silence_from is not None:
            return None
        return u.start / RATE, (self._fed - u.start) / RATE

    def speech_so_far(self) -> np.ndarray | None:
        """The utterance going on, with its lead-in, up to the last audio fed; None when there is none."""
        u = self._s.utterance
        if u is None:
            return None
        lo, hi = self._bounds(u.start, self._fed)
        return np.concatenate(self._s.audio)[lo:hi].copy()

    def silence_s(self, since_s: float) -> float | None:
        """Seconds of silence heard so far in the pause that began at `since_s`; None when the speech went on
        (or the utterance ended) since then."""
        u = self._s.utterance
        if u is None or u.silence_from is None or u.silence_from != round(since_s * RATE):
            return None
        return (self._fed - self._s.pending.size - u.silence_from) / RATE

    def pause_audio(self, since_s: float) -> np.ndarray | None:
        """The audio heard since the pause that began at `since_s`, the part the VAD has not judged yet included;
        None when the speech went on (or the utterance ended) since then."""
        if self.silence_s(since_s) is None:
            return None
        return np.concatenate(self._s.audio)[round(since_s * RATE) - self._s.audio_from :]

    def sound_end_s(self, since_s: float, lead_s: float, rise_db: float) -> float | None:
        """Where the sound really stopped before the pause that began at `since_s` (`audio.sound_ended`: up to
        `lead_s` earlier, the VAD hearing speech stop a window or two late; sound is `rise_db` over the pause's
        quiet level); None when the speech went on."""
        if self.silence_s(since_s) is None:
            return None
        at = round(since_s * RATE) - self._s.audio_from  # in the kept audio
        lead = min(round(lead_s * RATE), at)
        return since_s - sound_ended(np.concatenate(self._s.audio)[at - lead :], lead, rise_db) / RATE

    def end_now(self, since_s: float) -> UtteranceEnded | None:
        """End the utterance in the pause that began at `since_s`, as if the end silence had passed; None when
        the speech went on since then."""
        if self.silence_s(since_s) is None:
            return None
        return self._finish(round(since_s * RATE), truncated=False)

    def _bounds(self, start: int, speech_end: int) -> tuple[int, int]:
        """The slice of the kept audio from `start` to `speech_end`, with `speech_pad_ms` either side if heard."""
        s = self._s
        kept = sum(a.size for a in s.audio)
        lo = max(start - self._pad, s.audio_from) - s.audio_from
        return lo, min(speech_end + self._pad, s.audio_from + kept) - s.audio_from

    def _finish(self, speech_end: int, truncated: bool) -> UtteranceEnded:
        u, s = self._s.utterance, self._s
        assert u is not None
        lo, hi = self._bounds(u.start, speech_end)
        s.utterance = None
        return UtteranceEnded(np.concatenate(s.audio)[lo:hi].copy(), u.start / RATE, speech_end / RATE, truncated)

    def _trim(self) -> None:
        """Keep only the audio an utterance may still need: all of the current one, or the pre-roll of one that
        may start in the samples the VAD has not judged yet (`pending`: up to a window before the end)."""
        s = self._s
        keep_from = (s.utterance.start if s.utterance else self._fed - s.pending.size) - self._pad
        while len(s.audio) > 1 and s.audio_from + s.audio[0].size <= keep_from:
            s.audio_from += s.audio[0].size
            s.audio.pop(0)
