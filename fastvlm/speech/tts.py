"""Text to speech: a `Speaker` Protocol, edge-tts (online), eSpeak NG (offline) and a fallback between them.

Every call writes its own temp file (`fastvlm-tts-*`, in `SpeechConfig.audio_dir`), never a shared name;
`Speech.delete()` removes one, `remove_old_audio()` sweeps what was left behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Protocol

from ..engine.events import InputError
from .config import SpeechConfig
from .espeak import EspeakBackend, EspeakError, find_backend
from .sentences import SentenceChunker, split_sentences

__all__ = ["EdgeSpeaker", "EspeakSpeaker", "FallbackSpeaker", "SentenceChunker", "Speaker", "Speech",
           "SpeechUnavailable", "remove_old_audio", "split_sentences"]  # fmt: skip

log = logging.getLogger(__name__)
PREFIX = "fastvlm-tts-"


class SpeechUnavailable(RuntimeError):
    """No sound could be made; the message says why and what to install or check."""


@dataclass(frozen=True)
class Speech:
    """One spoken piece of text, in its own file."""

    path: Path  # .mp3 (edge-tts) or .wav (eSpeak NG)
    engine: str  # "edge-tts" or "espeak-ng"
    voice: str
    elapsed_s: float = 0.0
    notice: str | None = None  # e.g. why the first engine did not answer

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


class Speaker(Protocol):
    def synthesize(self, text: str) -> Speech:
        """Speak `text` into a new file. Raises SpeechUnavailable (InputError for empty text)."""
        ...


def _new_file(directory: Path | None, suffix: str) -> Path:
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=PREFIX, suffix=suffix, dir=directory)
    os.close(fd)
    return Path(name)


def _check_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise InputError("there is no text to speak")
    return text


def remove_old_audio(directory: Path | None = None, older_than_s: float = 3600.0) -> int:
    """Delete this module's audio files older than `older_than_s` in `directory` (default: temp dir)."""
    folder = directory or Path(tempfile.gettempdir())
    cutoff, removed = time.time() - older_than_s, 0
    for path in folder.glob(f"{PREFIX}*"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError:  # another process removed it first
            pass
    return removed


class EdgeSpeaker:
    """Microsoft Edge's online voices through edge-tts, under a timeout. Needs the internet."""

    engine = "edge-tts"

    def __init__(self, voice: str = "en-US-ChristopherNeural", timeout_s: float = 5.0,
                 audio_dir: Path | None = None) -> None:  # fmt: skip
        self.voice, self.timeout_s, self.audio_dir = voice, timeout_s, audio_dir

    @classmethod
    def from_config(cls, config: SpeechConfig) -> EdgeSpeaker:
        return cls(config.tts_voice, config.tts_timeout_s, config.audio_dir)

    def synthesize(self, text: str) -> Speech:
        text = _check_text(text)
        try:
            import edge_tts
        except ImportError as e:
            raise SpeechUnavailable("edge-tts is not installed: pip install edge-tts") from e
        t0, path = time.perf_counter(), _new_file(self.audio_dir, ".mp3")
        try:
            _run(edge_tts.Communicate(text, self.voice).save(str(path)), self.timeout_s)
            if path.stat().st_size == 0:  # edge-tts leaves an empty file when it cannot connect
                raise SpeechUnavailable("edge-tts returned no audio")
        except Exception as e:
            path.unlink(missing_ok=True)
            if isinstance(e, SpeechUnavailable):
                raise
            raise SpeechUnavailable(f"edge-tts failed ({self._reason(e)})") from e
        return Speech(path, self.engine, self.voice, time.perf_counter() - t0)

    def _reason(self, error: Exception) -> str:
        if isinstance(error, TimeoutError):
            return f"timed out after {self.timeout_s:g} s"
        if isinstance(error, OSError):  # aiohttp's connection and DNS errors are OSErrors
            return f"no connection: {type(error).__name__}"
        return f"{type(error).__name__}: {error}"[:200]


def _run(coroutine, timeout_s: float) -> None:
    """Run a coroutine to completion under a timeout, from sync code (in a worker thread if a loop runs here)."""

    async def bounded():
        return await asyncio.wait_for(coroutine, timeout_s)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(bounded())
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, bounded()).result()


class EspeakSpeaker:
    """eSpeak NG, offline: robotic but always there. `load()` finds the library or the program."""

    engine = "espeak-ng"

    def __init__(self, backend: EspeakBackend, voice: str = "en-us", rate: int = 175,
                 audio_dir: Path | None = None) -> None:  # fmt: skip
        self.backend, self.voice, self.rate, self.audio_dir = backend, voice, rate, audio_dir

    @classmethod
    def load(cls, config: SpeechConfig | None = None) -> EspeakSpeaker:
        config = config or SpeechConfig()
        try:
            backend = find_backend()
        except EspeakError as e:
            raise SpeechUnavailable(str(e)) from e
        log.info("eSpeak NG through %s", backend.name)
        return cls(backend, config.espeak_voice, config.espeak_rate, config.audio_dir)

    def synthesize(self, text: str) -> Speech:
        text = _check_text(text)
        t0, path = time.perf_counter(), _new_file(self.audio_dir, ".wav")
        try:
            self.backend.write(text, self.voice, self.rate, path)
            if path.stat().st_size <= 44:  # a WAV header and no samples
                raise SpeechUnavailable("eSpeak NG produced no audio")
        except Exception as e:
            path.unlink(missing_ok=True)
            raise e if isinstance(e, SpeechUnavailable) else SpeechUnavailable(f"eSpeak NG failed: {e}") from e
        return Speech(path, self.engine, self.voice, time.perf_counter() - t0)


class FallbackSpeaker:
    """Try `primary` (edge-tts); when it fails, `fallback` (eSpeak NG) speaks and `Speech.notice` says why.

    After a primary failure the primary is skipped for `retry_primary_after_s`, twice as long after each failure
    in a row up to `max_retry_after_s` (60 s, 2, 4, 8 min, then every 15 min), so an unreachable network costs
    its timeout on one sentence in that while, not on every sentence; a success starts again from 60 s.
    """

    def __init__(self, primary: Speaker, fallback: Speaker, retry_primary_after_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, max_retry_after_s: float = 900.0) -> None:
        self.primary, self.fallback = primary, fallback
        self.retry_primary_after_s, self.max_retry_after_s = retry_primary_after_s, max_retry_after_s
        self._clock = clock
        self._primary_down_until = float("-inf")  # shared by all sessions: the network is the same for all
        self._failures = 0  # primary failures in a row

    @classmethod
    def load(cls, config: SpeechConfig | None = None) -> FallbackSpeaker:
        config = config or SpeechConfig()
        return cls(EdgeSpeaker.from_config(config), EspeakSpeaker.load(config))

    def synthesize(self, text: str) -> Speech:
        text = _check_text(text)
        reason = "edge-tts skipped after a recent failure"
        if self._clock() >= self._primary_down_until:
            try:
                speech = self.primary.synthesize(text)
                self._failures = 0
                return speech
            except SpeechUnavailable as e:
                reason = str(e)
                wait = min(self.retry_primary_after_s * 2 ** min(self._failures, 20), self.max_retry_after_s)
                self._failures += 1
                self._primary_down_until = self._clock() + wait
                log.warning("primary voice failed, using the offline voice (tried again in %.0f s): %s", wait, reason)
        try:
            speech = self.fallback.synthesize(text)
        except SpeechUnavailable as e:
            raise SpeechUnavailable(f"No sound: {reason}; and the offline voice failed too ({e}).") from e
        return Speech(speech.path, speech.engine, speech.voice, speech.elapsed_s, notice=f"offline voice: {reason}")
