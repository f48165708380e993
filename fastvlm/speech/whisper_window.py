"""Whisper on a mel window shorter than its 30 s: `WindowedWhisper` wraps `faster_whisper.WhisperModel`.

faster-whisper always pads the log-mel to 3000 frames (30 s), so Whisper's encoder costs the same on a 2 s
question as on 30 s of speech. CTranslate2's encoder takes a shorter window as it is (as whisper.cpp's
`audio_ctx`): on a 10 s window tiny.en encodes ~8x faster, and its transcripts of the bench's questions were
no worse (docs/speech.md has the measurement; windows of 6 s and less made it repeat itself). This module does
what `WhisperModel.transcribe` does for one window, with the same features, prompt, suppressed tokens and
no-speech rule, on the window it is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

import numpy as np

from .audio import RATE

_HOP = 160  # samples per mel frame: 100 frames a second
_NO_SPEECH_P, _LOGPROB_FLOOR = 0.6, -1.0  # faster-whisper's defaults: a segment both above and below is skipped


@dataclass(frozen=True)
class Segment:
    text: str
    no_speech_prob: float
    avg_logprob: float


@dataclass(frozen=True)
class Info:
    language: str


class WindowedWhisper:
    """A loaded `faster_whisper.WhisperModel`: `transcribe` as it is, and `transcribe_window` on a short window."""

    def __init__(self, model: Any) -> None:
        self.model = model  # faster_whisper.WhisperModel; .model is its ctranslate2.models.Whisper
        self._prompts: dict[str, tuple[Any, list[int], list[int]]] = {}  # language -> tokenizer, prompt, suppressed

    def transcribe(self, audio: np.ndarray, **options: Any) -> tuple[Iterable[Any], Any]:
        return self.model.transcribe(audio, **options)

    def transcribe_window(self, audio: np.ndarray, window_s: float, *, language: str | None = None,
                          beam_size: int = 5, vad_filter: bool = True) -> tuple[list[Segment], Info]:
        """(n,) float32 16 kHz audio of at most `window_s` -> (segments, info), as `transcribe` with
        temperature 0, no timestamps and no previous text, but encoded in a `window_s` window."""
        import ctranslate2
        from faster_whisper.vad import VadOptions, collect_chunks, get_speech_timestamps

        frames = int(round(window_s * RATE / _HOP))
        frames += frames % 2  # the encoder's first convolution has stride 2
        if audio.size > frames * _HOP:
            raise ValueError(f"{audio.size / RATE:.1f} s of audio does not fit a {window_s} s window")
        if vad_filter:  # as transcribe(vad_filter=True): silent stretches out
            audio = np.concatenate(collect_chunks(audio, get_speech_timestamps(audio, VadOptions()))[0])
        if audio.size == 0:
            return [], Info(language or "en")
        features = self.model.feature_extractor(audio)[:, :-1]  # (80, n): transcribe drops the last frame too
        mel = np.zeros((1, features.shape[0], frames), np.float32)  # (1, 80, frames), zeros as pad_or_trim's
        mel[0, :, : features.shape[1]] = features[:, :frames]
        encoded = self.model.model.encode(ctranslate2.StorageView.from_array(mel))  # (1, frames / 2, d)
        if language is None and self.model.model.is_multilingual:
            language = self.model.model.detect_language(encoded)[0][0][0][2:-2]  # "<|en|>" -> "en"
        language = language or "en"
        tokenizer, prompt, suppress = self._prompt(language)
        budget = min(448 - len(prompt), 16 + int(10 * audio.size / RATE))  # ~3x what speech says: loops stop
        result = self.model.model.generate(
            encoded, [prompt], beam_size=beam_size, max_length=len(prompt) + budget, return_scores=True,
            return_no_speech_prob=True, suppress_blank=True, suppress_tokens=suppress)[0]  # fmt: skip
        tokens = result.sequences_ids[0]
        avg_logprob = result.scores[0] * len(tokens) / (len(tokens) + 1)  # as faster-whisper, length_penalty 1
        if result.no_speech_prob > _NO_SPEECH_P and avg_logprob < _LOGPROB_FLOOR:
            return [], Info(language)
        return [Segment(tokenizer.decode(tokens), result.no_speech_prob, avg_logprob)], Info(language)

    def _prompt(self, language: str) -> tuple[Any, list[int], list[int]]:
        """faster-whisper's tokenizer for `language`, its start-of-transcript tokens without timestamps, and
        the tokens never generated (transcribe's suppress_tokens=[-1])."""
        if language not in self._prompts:
            from faster_whisper.tokenizer import Tokenizer
            from faster_whisper.transcribe import get_suppressed_tokens

            tokenizer = Tokenizer(self.model.hf_tokenizer, self.model.model.is_multilingual, task="transcribe",
                                  language=language)
            prompt = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
            self._prompts[language] = tokenizer, prompt, list(get_suppressed_tokens(tokenizer, [-1]))
        return self._prompts[language]
