"""eSpeak NG, the offline voice: its library from the `espeakng-loader` wheel, or Debian's `espeak-ng` program.

Both write a WAV file. eSpeak NG is GPL-3.0-or-later (see docs/speech.md).
"""

from __future__ import annotations

import ctypes
import functools
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Protocol

import numpy as np

from .audio import write_wav

_HINT = "pip install espeakng-loader (or apt-get install espeak-ng)"
_SYNCHRONOUS = 2  # espeak_AUDIO_OUTPUT: AUDIO_OUTPUT_SYNCHRONOUS, samples come to the callback
_RATE = 1  # espeak_PARAMETER: espeakRATE, words per minute
_CHARS_UTF8 = 1  # espeak_Synth flags: UTF-8 text, no SSML (so "<" in an answer is read, never parsed)
_Callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class EspeakError(RuntimeError):
    """eSpeak NG is missing or could not speak; the message says which and how to fix it."""


class EspeakBackend(Protocol):
    name: str  # for logs: "libespeak-ng (espeakng-loader)" or the program's path

    def write(self, text: str, voice: str, rate: int, path: Path) -> None:
        """Speak `text` into the WAV file `path` (which exists, empty). Raises EspeakError."""
        ...


class EspeakLibrary:
    """libespeak-ng through ctypes. The library keeps one global state per process, so calls take a lock."""

    name = "libespeak-ng (espeakng-loader)"

    def __init__(self, lib: ctypes.CDLL, sample_rate: int) -> None:
        self._lib = lib
        self.sample_rate = sample_rate  # 22050 for the standard voices
        self._lock = threading.Lock()
        self._chunks: list[np.ndarray] = []
        self._callback = _Callback(self._collect)  # kept referenced: the library calls it

        lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, wav, n: int, events) -> int:
        if wav and n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        return 0  # 0: go on

    def synthesize(self, text: str, voice: str, rate: int) -> np.ndarray:
        """text -> (n,) int16 samples at `sample_rate`."""
        data = text.encode("utf-8") + b"\0"
        with self._lock:
            if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
                raise EspeakError(f"eSpeak NG has no voice {voice!r} (try en-us, en-gb, en)")
            self._lib.espeak_SetParameter(_RATE, rate, 0)
            self._chunks = []
            status = self._lib.espeak_Synth(data, len(data), 0, 0, 0, _CHARS_UTF8, None, None)
            chunks, self._chunks = self._chunks, []
        if status != 0:
            raise EspeakError(f"eSpeak NG could not speak (status {status})")
        return np.concatenate(chunks) if chunks else np.zeros(0, np.int16)

    def write(self, text: str, voice: str, rate: int, path: Path) -> None:
        write_wav(path, self.sample_rate, self.synthesize(text, voice, rate))


@functools.lru_cache(maxsize=1)
def open_library() -> EspeakLibrary:
    """The process's one initialised libespeak-ng from the espeakng-loader wheel."""
    try:
        import espeakng_loader
    except ImportError as e:
        raise EspeakError(f"no eSpeak NG library: {_HINT}") from e
    try:
        lib = ctypes.CDLL(espeakng_loader.get_library_path())
        data = espeakng_loader.get_data_path()
    except (OSError, RuntimeError) as e:
        broken = f"the espeakng-loader wheel is broken ({e}): reinstall it (or apt-get install espeak-ng)"
        raise EspeakError(broken) from e
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                 ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]  # fmt: skip
    lib.espeak_SetSynthCallback.argtypes = [_Callback]
    sample_rate = lib.espeak_Initialize(_SYNCHRONOUS, 0, data.encode(), 0)
    if sample_rate <= 0:
        raise EspeakError(f"libespeak-ng did not start with its data at {data}: reinstall espeakng-loader")
    return EspeakLibrary(lib, sample_rate)


def as_words(text: str) -> str:
    """`text` as the program should read it: `[[...]]` would be eSpeak phoneme codes to the program (not to the
    library), so every `[[` and `]]` is split (`[ [`), and an answer that writes them is read as it is written."""
    return re.sub(r"([\[\]])(?=\1)", r"\1 ", text)


class EspeakProgram:
    """Debian's `espeak-ng` program. The text goes in on stdin, never through a shell or argv."""

    def __init__(self, program: str, timeout_s: float = 15.0) -> None:
        self.name = program
        self.timeout_s = timeout_s

    def write(self, text: str, voice: str, rate: int, path: Path) -> None:
        args = [self.name, "--stdin", "-b", "1", "-v", voice, "-s", str(rate), "-w", str(path)]
        try:
            done = subprocess.run(args, input=as_words(text).encode("utf-8"), capture_output=True,
                                  timeout=self.timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EspeakError(f"{self.name} did not run: {e}") from e
        if done.returncode != 0:
            raise EspeakError(f"{self.name} failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")


def find_backend() -> EspeakBackend:
    """The wheel's library if it loads, else the `espeak-ng` program on PATH; EspeakError if neither."""
    try:
        return open_library()
    except EspeakError as wheel_error:
        program = shutil.which("espeak-ng")
        if program is None:
            raise EspeakError(f"{wheel_error}; no espeak-ng program on PATH either") from wheel_error
        return EspeakProgram(program)
