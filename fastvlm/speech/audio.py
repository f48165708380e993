"""Audio as the speech models want it: float32 mono samples at 16 kHz, in [-1, 1].

Pure numpy (no scipy): microphones hand over int16 at 44.1/48 kHz, often stereo;
eSpeak NG speaks int16 at 22.05 kHz. Broken audio raises `fastvlm.engine.events.InputError`.
"""

from __future__ import annotations

import os
import wave
from pathlib import Path

import numpy as np

from ..engine.events import InputError

RATE = 16_000  # Whisper and Silero VAD both work at 16 kHz
_MAX_CHANNELS = 8
_BLOCK = 128  # 8 ms at 16 kHz: `sound_returns`' and `sound_ended`'s unit


def to_mono_16k(sample_rate: int, samples: np.ndarray) -> np.ndarray:
    """(sr, samples) as a microphone or a WAV file gives it -> (n,) float32 mono at 16 kHz.

    `samples` may be int16/int32/uint8 PCM or float, shaped (n,), (n, channels) or (channels, n).
    """
    return resample(to_float_mono(samples), _check_rate(sample_rate), RATE)


def to_float_mono(samples: np.ndarray) -> np.ndarray:
    """PCM or float samples, any channel layout -> (n,) float32 in [-1, 1]; checks for broken audio."""
    x = np.asarray(samples)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    elif x.dtype == np.int32:
        x = (x.astype(np.float64) / 2147483648.0).astype(np.float32)
    elif x.dtype == np.uint8:  # 8-bit WAV is unsigned, centred on 128
        x = (x.astype(np.float32) - 128.0) / 128.0
    elif np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float32, copy=False)
    else:
        raise InputError(f"audio samples must be int16, int32, uint8 or float, got {x.dtype}")
    if x.ndim == 2:
        # Gradio and WAV readers give (n, channels); some libraries give (channels, n).
        axis = 1 if x.shape[1] <= _MAX_CHANNELS else 0 if x.shape[0] <= _MAX_CHANNELS else None
        if axis is None:
            raise InputError(f"audio of shape {x.shape} has no channel axis of at most {_MAX_CHANNELS}")
        x = x.mean(axis=axis, dtype=np.float32)
    elif x.ndim != 1:
        raise InputError(f"audio must be (samples,) or (samples, channels), got shape {x.shape}")
    return check_audio(x)


def check_audio(audio: np.ndarray) -> np.ndarray:
    """Refuse empty or non-finite audio with a message that says what is wrong."""
    if audio.ndim != 1:
        raise InputError(f"audio must be one mono channel (n,), got shape {audio.shape}")
    if audio.size == 0:
        raise InputError("the recording is empty (no samples): record again, and allow the microphone")
    if not np.isfinite(audio).all():
        raise InputError("the recording has NaN or infinite samples: the audio is broken, record again")
    return audio


def _check_rate(sample_rate: int) -> int:
    if not isinstance(sample_rate, (int, np.integer)) or not 1_000 <= sample_rate <= 384_000:
        raise InputError(f"sample rate must be a whole number of Hz in 1000..384000, got {sample_rate!r}")
    return int(sample_rate)


def resample(x: np.ndarray, rate_in: int, rate_out: int = RATE) -> np.ndarray:
    """(n,) float32 at rate_in -> (m,) float32 at rate_out: windowed-sinc low-pass, then linear interpolation."""
    if rate_in == rate_out or x.size == 0:
        return x
    if rate_in > rate_out:  # keep content below the new Nyquist frequency, or it folds back as noise
        taps = _lowpass(0.45 * rate_out / rate_in)
        x = np.convolve(x, taps)[taps.size // 2 : taps.size // 2 + x.size].astype(np.float32)  # centred, as long as x
    n_out = max(1, round(x.size * rate_out / rate_in))
    positions = np.arange(n_out) * (rate_in / rate_out)
    return np.interp(positions, np.arange(x.size), x).astype(np.float32)


class StreamResampler:
    """One stream's chunks -> (n,) float32 mono at `rate_out`, as `resample` makes the whole stream at once.

    Resampling each chunk alone clicks at its edges (the filter sees zeros past them) and miscounts short chunks;
    this keeps the filter's history and the interpolation's phase instead. An output sample is made once the
    input it needs has arrived, so the output runs `delay` samples behind `resample` of the whole (4-10 samples,
    under 1 ms, from 8 to 96 kHz): output j is the whole stream's output j - delay (j < delay: the silence before
    it), and after n input samples round(n * rate_out / rate_in) have come out, to within one. A new rate starts
    afresh; `rate_out` itself passes through untouched."""

    def __init__(self, rate_out: int = RATE) -> None:
        self.rate_out, self.rate_in = rate_out, rate_out

    def __call__(self, sample_rate: int, samples: np.ndarray) -> np.ndarray:
        x, rate = to_float_mono(samples), _check_rate(sample_rate)
        if rate != self.rate_in:
            self._start(rate)
        return x if rate == self.rate_out else self._resample(x)

    def _start(self, rate: int) -> None:
        self.rate_in, self._step = rate, rate / self.rate_out  # input samples per output sample
        self._taps = _lowpass(0.45 * self.rate_out / rate) if rate > self.rate_out else np.ones(1, np.float32)
        half = self._half = self._taps.size // 2
        self.delay = int(np.floor((half + 2) / self._step))  # output count within one of n * rate_out / rate_in
        self._next = 0  # the next output sample; it lies at input position (j - delay) * step
        self._from = int(np.floor(-self.delay * self._step)) - half  # input index of `_x[0]`
        self._x = np.zeros(-self._from, np.float32)  # the input still needed: silence before the stream

    def _resample(self, x: np.ndarray) -> np.ndarray:
        xs = np.concatenate([self._x, x])  # (k,) the input from index `_from`
        lo = self._from + self._half  # index of the first filtered sample made from it
        y = np.convolve(xs, self._taps, mode="valid") if xs.size >= self._taps.size else xs[:0]  # from lo
        hi = lo + y.size - 1  # the last one: an output needs the filtered samples either side of its position
        end = max(self._next, self.delay + int(np.floor((hi - 1) / self._step)) + 1) if y.size >= 2 else self._next
        if end == self._next:
            out = y[:0]
        else:
            positions = (np.arange(self._next, end) - self.delay) * self._step  # as `resample` places them
            out = np.interp(positions, np.arange(lo, hi + 1), y).astype(np.float32)
        self._next = end
        keep = int(np.floor((end - self.delay) * self._step)) - self._half  # what the next output needs
        self._x, self._from = xs[keep - self._from :], keep
        return out


def _lowpass(cutoff: float, half_width: int | None = None) -> np.ndarray:
    """FIR taps with a cutoff `cutoff` (a fraction of the input rate), unit gain at DC."""
    half = half_width or int(np.ceil(4 / cutoff))  # ~16 taps per output sample period: a ~40 dB stop band
    t = np.arange(-half, half + 1)
    taps = 2 * cutoff * np.sinc(2 * cutoff * t) * np.blackman(2 * half + 1)
    return (taps / taps.sum()).astype(np.float32)


def rms(audio: np.ndarray) -> float:
    """Root mean square of float samples in [-1, 1] (0 for silence, ~0.1 for speech at a normal level)."""
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) if audio.size else 0.0


def sound_returns(pause: np.ndarray, recent: int, rise_db: float = 12.0, floor_dbfs: float = -50.0) -> bool:
    """Did sound come back in the last `recent` samples of `pause` (16 kHz audio since a pause began)? True when
    an 8 ms block there is `rise_db` louder than the pause's quiet level (its 20th-percentile block before them)
    and louder than `floor_dbfs`. Quicker than the VAD, which needs a window or two (32-64 ms) to hear speech
    again: it may hold the end of a turn while the VAD makes up its mind, never end one."""
    level = _block_levels(pause)
    n = level.size
    if n == 0:
        return False
    k = min(n, max(1, recent // _BLOCK))
    floor = float(np.percentile(level[:-k], 20)) if n > k else 0.0
    return bool((level[-k:] > _loud(floor, rise_db, floor_dbfs)).any())


def sound_ended(audio: np.ndarray, lead: int, rise_db: float = 12.0, floor_dbfs: float = -50.0) -> int:
    """How long before the VAD's start of a pause did the sound really end? `audio`: 16 kHz, `lead` samples
    before that start, then the pause heard so far. The VAD hears speech stop a window or two late; the sound
    ended after the last 8 ms block of the lead (counted back from the pause) that is `rise_db` louder than the
    pause's quiet level (its 20th-percentile block) and louder than `floor_dbfs`. -> samples, whole blocks within
    the lead: 0 when its last block is loud or no pause is heard yet, all its whole blocks when they are quiet."""
    if not 0 <= lead <= audio.size:
        raise ValueError(f"lead must be within the audio's {audio.size} samples, not {lead}")
    pause = _block_levels(audio[lead:])
    if pause.size == 0:
        return 0
    before = _block_levels(audio[lead % _BLOCK : lead])  # whole blocks, the last one ending at the pause
    loud = np.flatnonzero(before > _loud(float(np.percentile(pause, 20)), rise_db, floor_dbfs))
    return (before.size - (int(loud[-1]) + 1 if loud.size else 0)) * _BLOCK


def _block_levels(audio: np.ndarray) -> np.ndarray:
    """(n,) RMS of each whole 8 ms block of `audio`, in order."""
    n = audio.size // _BLOCK
    blocks = audio[: n * _BLOCK].reshape(n, _BLOCK).astype(np.float64)
    return np.sqrt(np.mean(np.square(blocks), axis=1))


def _loud(floor: float, rise_db: float, floor_dbfs: float) -> float:
    """The RMS a block needs to be sound over a quiet level of `floor`."""
    return max(floor * 10 ** (rise_db / 20), 10 ** (floor_dbfs / 20))


def to_int16(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


def write_wav(path: str | Path, sample_rate: int, samples: np.ndarray) -> None:
    """Write mono int16 (or float in [-1, 1]) samples as a 16-bit PCM WAV file."""
    pcm = samples if samples.dtype == np.int16 else to_int16(samples)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())


def read_wav(path: str | Path) -> tuple[int, np.ndarray]:
    """A 16-bit PCM WAV file -> (sample rate, (n,) or (n, channels) int16)."""
    with wave.open(str(path), "rb") as w:
        if w.getsampwidth() != 2:
            raise InputError(f"{path}: only 16-bit PCM WAV is read here, got {8 * w.getsampwidth()}-bit")
        channels, rate = w.getnchannels(), w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.int16)
    return rate, pcm.reshape(-1, channels) if channels > 1 else pcm


def wav_seconds(path: str | Path) -> float:
    """How long a WAV file's sound is, read from its header alone (any sample format: PCM, float, extensible), so a
    long file can be refused before it is decoded. InputError for a file that is not a WAV."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise InputError("not a WAV file (RIFF/WAVE)")
        byte_rate = None
        for _ in range(64):  # the sound comes after a few chunks; a file of countless empty ones is not read through
            chunk = f.read(8)
            if len(chunk) < 8:
                break
            name, size = chunk[:4], int.from_bytes(chunk[4:], "little")
            if name == b"fmt ":
                fmt = f.read(size + size % 2)
                byte_rate = int.from_bytes(fmt[8:12], "little") if len(fmt) >= 12 else 0
            elif name == b"data":
                if not byte_rate:
                    raise InputError("a WAV file without a readable format before its sound")
                if size in (0, 0xFFFFFFFF):  # written while streaming, its length never filled in: to the end
                    size = os.fstat(f.fileno()).st_size - f.tell()
                return size / byte_rate
            else:
                f.seek(size + size % 2, os.SEEK_CUR)
    raise InputError("a WAV file without sound (no data chunk)")
