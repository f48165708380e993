"""Silero VAD, as faster-whisper ships it, run window by window for `vad.TurnDetector` (one model per process)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np


class SileroVad:
    """faster-whisper's Silero VAD ONNX session, run window by window with the LSTM state carried over.

    Gives exactly the probabilities `faster_whisper.vad.get_speech_timestamps` computes over the whole
    recording at once, but each chunk costs only its own windows.
    """

    CONTEXT = 64  # samples of the previous window each window sees

    def __init__(self, session: Any) -> None:
        self._session = session  # onnxruntime.InferenceSession: run() is thread-safe

    def initial_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        zeros = np.zeros((1, 1, 128), np.float32)
        return zeros, zeros, np.zeros(self.CONTEXT, np.float32)  # h, c, last window's tail

    def __call__(self, windows: np.ndarray, state: Any) -> tuple[np.ndarray, Any]:
        h, c, tail = state
        context = np.concatenate([tail[None], windows[:-1, -self.CONTEXT :]])  # (n, 64)
        batch = np.concatenate([context, windows], axis=1)  # (n, 576)
        probs, h, c = self._session.run(None, {"input": batch, "h": h, "c": c})
        return probs.reshape(-1), (h, c, windows[-1, -self.CONTEXT :].copy())


@functools.lru_cache(maxsize=1)
def silero_vad() -> SileroVad:
    """The process's shared Silero VAD (loaded on first use)."""
    try:
        from faster_whisper.vad import get_vad_model
    except ImportError as e:
        hint = "turn detection needs faster-whisper (it ships Silero VAD): pip install faster-whisper"
        raise ImportError(hint) from e
    return SileroVad(get_vad_model().session)
