"""The VAD's state over one microphone stream, kept as the model was trained (docs/voice.md, "Barge-in on
digital silence").

Windows within 2 steps of 16-bit 0 (a muted track, a noise gate, Chromium's fake microphone) are silence the VAD
is never shown; after `REFRESH_WINDOWS` heard windows under `QUIET_P` outside an utterance its state starts again.
Left to drift over either, Silero dropped people's soft onsets as clicks (barge-in 0.26-0.74 s late).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

WINDOW = 512  # Silero's step at 16 kHz: one probability per 32 ms
DIGITAL_SILENCE, REFRESH_WINDOWS, QUIET_P = 2 / 32768, 62, 0.15  # 62 windows: 2 s


class VadModel(Protocol):
    """Speech probabilities for 512-sample windows of 16 kHz audio. Stateless: the caller holds `state`."""

    def initial_state(self) -> Any: ...

    def __call__(self, windows: np.ndarray, state: Any) -> tuple[np.ndarray, Any]:
        """(n, 512) float32 -> ((n,) probabilities in [0, 1], the state after the last window)."""
        ...


class VadStream:
    """One stream's speech probabilities, window by window, with the VAD's state carried between chunks."""

    def __init__(self, vad: VadModel) -> None:
        self.vad = vad
        self.state = vad.initial_state()
        self.quiet_windows = 0  # heard windows in a row below QUIET_P

    def probabilities(self, windows: np.ndarray, *, in_utterance: bool) -> np.ndarray:
        """(n, WINDOW) -> (n,) speech probabilities: 0 for digital silence. The state may start again before
        these windows only outside an utterance (`in_utterance`: a question is going on, pauses included)."""
        probs = np.zeros(len(windows), np.float32)
        heard = np.abs(windows).max(axis=1) > DIGITAL_SILENCE
        if heard.any():
            if not in_utterance and self.quiet_windows >= REFRESH_WINDOWS:
                self.state, self.quiet_windows = self.vad.initial_state(), 0
            p, self.state = self.vad(windows[heard], self.state)
            probs[heard], loud = p, np.flatnonzero(p >= QUIET_P)
            self.quiet_windows = self.quiet_windows + p.size if loud.size == 0 else p.size - 1 - int(loud[-1])
        return probs
