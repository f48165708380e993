"""A loudspeaker in a room between the page's speaker and its microphone, for the browser bench's echo walk
(`bench --journeys --browser --echo N --echo-room`).

The plain echo walk loops the page's sound straight into its microphone: the echo canceller's easiest case. A
laptop in a room is harder: the sound leaves a small loudspeaker that distorts it, reaches the microphone late
and again off every wall for a few hundred milliseconds, over the microphone's own noise. `AcousticPath` plays
that between two PulseAudio null sinks: what the page plays (`SPEAKER`) is read by `parec`, passed through
`Room` (soft clipping, a band-limited reverberant impulse response, a delay, noise) and written by `pacat` into
the sink whose monitor is the page's microphone (`echo.SINK`). `bench-turns --room` hears people's questions in
the same rooms (`person_in`, `through`: the reverberation and noise, no loudspeaker). A model with stated
numbers, not a recording of a real room.
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, replace

import numpy as np

RATE = 16_000  # the path runs at 16 kHz: PulseAudio resamples either side
BLOCK = 320  # 20 ms


@dataclass(frozen=True)
class RoomModel:
    """The acoustic path to a laptop's microphone from its loudspeaker (defaults: an office or living room), or
    from a person (`person_in`)."""

    rt60_s: float = 0.4  # reverberation: time for the tail to fall 60 dB
    delay_ms: float = 6.0  # the direct sound's flight (~2 m) and nothing else: device buffers come on top
    gain_db: float = -6.0  # the direct sound's level at the microphone against what the page plays
    reverb_db: float = -6.0  # the tail's energy against the direct sound's
    drive: float = 2.0  # the loudspeaker's soft clipping: tanh(drive * x) / tanh(drive); 0: none (a person)
    low_hz: float = 200.0  # the loudspeaker's band
    high_hz: float = 6000.0
    noise_dbfs: float = -60.0  # the microphone's own noise (RMS)
    seed: int = 0


# `bench --echo-room NAME`: an office, a room of hard surfaces, and that room with a laptop's loudspeaker at full
# volume next to its microphone (the echo as loud as what is played, clipping hard)
ROOMS = {"office": RoomModel(), "reverberant": RoomModel(rt60_s=0.8, reverb_db=0.0),
         "harsh": RoomModel(rt60_s=0.8, reverb_db=0.0, gain_db=0.0, drive=4.0)}


def band_pass(low_hz: float, high_hz: float, taps: int = 129) -> np.ndarray:
    """A linear-phase FIR band-pass (windowed sinc), unit gain in its band."""
    n = np.arange(taps) - (taps - 1) / 2
    high = 2 * high_hz / RATE * np.sinc(2 * high_hz / RATE * n)
    low = 2 * low_hz / RATE * np.sinc(2 * low_hz / RATE * n)
    return (high - low) * np.hamming(taps)


def impulse_response(model: RoomModel) -> np.ndarray:
    """The delayed direct sound plus an exponentially decaying noise tail (`rt60_s`), through the band."""
    rng = np.random.default_rng(model.seed)
    length = int(model.rt60_s * RATE)
    t = np.arange(length) / RATE
    tail = rng.standard_normal(length) * 10 ** (-3 * t / model.rt60_s)  # -60 dB at rt60_s
    tail[: int(0.003 * RATE)] = 0  # the first reflections come a few ms after the direct sound
    tail *= 10 ** (model.reverb_db / 20) / np.sqrt(np.sum(tail**2))
    tail[0] += 1.0  # the direct sound
    delay = np.zeros(int(model.delay_ms * RATE / 1000))
    return np.concatenate([delay, np.convolve(tail, band_pass(model.low_hz, model.high_hz))]) * 10 ** (
        model.gain_db / 20)


class Room:
    """`RoomModel` applied block by block to a stream (FFT overlap-add: its output is the full convolution)."""

    def __init__(self, model: RoomModel = RoomModel(), block: int = BLOCK) -> None:
        self.model, self.block = model, block
        self._h = impulse_response(model)
        self._nfft = 1 << int(np.ceil(np.log2(block + self._h.size - 1)))
        self._H = np.fft.rfft(self._h, self._nfft)
        self._tail = np.zeros(self._nfft - block)
        self._noise = np.random.default_rng(model.seed + 1)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """(block,) float samples the page played -> (block,) what the microphone hears of them."""
        driven = np.asarray(x, np.float64)
        if self.model.drive:
            driven = np.tanh(self.model.drive * driven) / np.tanh(self.model.drive)
        y = np.fft.irfft(np.fft.rfft(driven, self._nfft) * self._H, self._nfft)
        y[: self._tail.size] += self._tail
        out, self._tail = y[: self.block], y[self.block :].copy()
        noise = self._noise.standard_normal(self.block) * 10 ** (self.model.noise_dbfs / 20)
        return np.clip(out + noise, -1, 1).astype(np.float32)


def person_in(room: str) -> RoomModel:
    """A person about a metre from the microphone in one of `ROOMS`: the same reverberation, no loudspeaker."""
    return replace(ROOMS[room], drive=0.0, low_hz=0.0, high_hz=7800.0, gain_db=0.0, delay_ms=0.0)


def through(model: RoomModel, audio: np.ndarray, block: int = RATE) -> np.ndarray:
    """A whole 16 kHz recording as the microphone hears it in `model` (same length; the tail past its end is cut)."""
    room, x = Room(model, block), np.asarray(audio, np.float32)
    padded = np.concatenate([x, np.zeros(-x.size % block, np.float32)])
    return np.concatenate([room(padded[i : i + block]) for i in range(0, padded.size, block)])[: x.size]


class AcousticPath:
    """`parec` from `source` -> `Room` -> `pacat` into `sink`, on a thread, until `close()`."""

    def __init__(self, source: str, sink: str, model: RoomModel = RoomModel()) -> None:
        raw = ["--raw", "--format=float32le", f"--rate={RATE}", "--channels=1", "--latency-msec=20"]
        self.room = Room(model)
        self._rec = subprocess.Popen(["parec", f"--device={source}", *raw], stdout=subprocess.PIPE)
        self._play = subprocess.Popen(["pacat", "--playback", f"--device={sink}", *raw], stdin=subprocess.PIPE)
        self._thread = threading.Thread(target=self._run, name="acoustic-path", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        size = self.room.block * 4
        try:
            while block := self._rec.stdout.read(size):
                if len(block) < size:
                    break
                self._play.stdin.write(self.room(np.frombuffer(block, np.float32)).tobytes())
        except (BrokenPipeError, ValueError):  # closed under us
            pass

    def close(self) -> None:
        for process in (self._rec, self._play):
            process.terminate()
        for process in (self._rec, self._play):
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
        self._thread.join(timeout=5)
