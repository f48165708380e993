"""eSpeak NG's library backend on a fake libespeak-ng (the real one: tests/integration/test_speech_models.py): what
it is started and asked with (speak_lib.h's values), the samples its callback collects, and what its failures say;
the Debian program's failure message."""

import ctypes
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from fastvlm.speech import espeak
from fastvlm.speech.espeak import EspeakError, EspeakLibrary, EspeakProgram

AUDIO_OUTPUT_SYNCHRONOUS, ESPEAK_RATE, ESPEAK_CHARS_UTF8 = 2, 1, 1  # speak_lib.h


class Fn:
    """One C function of the fake library: callable, and takes `argtypes` as a ctypes function does."""

    def __init__(self, call):
        self.call = call

    def __call__(self, *args):
        return self.call(*args)


class FakeLib:
    """libespeak-ng's calls the backend makes, recorded; `Synth` sends `pieces` (None: a NULL buffer) to the
    callback; `Initialize` answers `rate`."""

    def __init__(self, pieces=((1, 2, 3), (4, 5)), voices=("en-us",), status=0, rate=22_050):
        self.pieces, self.voices, self.status, self.rate = pieces, voices, status, rate
        self.calls, self.callback, self.went_on = [], None, []
        self.espeak_Initialize, self.espeak_SetSynthCallback = Fn(self.initialize), Fn(self.set_callback)
        self.espeak_SetVoiceByName, self.espeak_SetParameter = Fn(self.set_voice), Fn(self.set_parameter)
        self.espeak_Synth = Fn(self.synth)

    def initialize(self, output, buffer_ms, path, options):
        self.calls.append(("Initialize", output, buffer_ms, path, options))
        return self.rate

    def set_callback(self, callback):
        self.callback = callback

    def set_voice(self, name):
        return 0 if name.decode() in self.voices else 1

    def set_parameter(self, parameter, value, relative):
        self.calls.append(("SetParameter", parameter, value, relative))

    def synth(self, data, size, position, position_type, end_position, flags, unique_id, user_data):
        self.calls.append(("Synth", data, size, position, position_type, end_position, flags))
        for piece in self.pieces:
            samples = None if piece is None else (ctypes.c_short * len(piece))(*piece)
            self.went_on.append(self.callback(samples, 0 if piece is None else len(piece), None))
        return self.status


def test_the_text_goes_as_nul_terminated_utf8_at_the_rate_asked_and_the_callbacks_samples_come_back():
    lib = FakeLib(pieces=((1, 2, 3), None, (), (4, 5), (6,)))
    samples = EspeakLibrary(lib, 22_050).synthesize("Größe <b>", "en-us", 160)
    assert samples.tolist() == [1, 2, 3, 4, 5, 6] and samples.dtype == np.int16
    data = "Größe <b>".encode() + b"\0"
    assert lib.calls == [("SetParameter", ESPEAK_RATE, 160, 0), ("Synth", data, len(data), 0, 0, 0, ESPEAK_CHARS_UTF8)]
    assert lib.went_on == [0] * 5  # 0: go on


def test_nothing_spoken_is_no_samples_and_failures_say_what_went_wrong():
    assert EspeakLibrary(FakeLib(pieces=()), 22_050).synthesize("Hi.", "en-us", 175).size == 0
    with pytest.raises(EspeakError, match="could not speak \\(status 1\\)"):
        EspeakLibrary(FakeLib(status=1), 22_050).synthesize("Hi.", "en-us", 175)
    with pytest.raises(EspeakError, match="no voice 'xx'"):
        EspeakLibrary(FakeLib(), 22_050).synthesize("Hi.", "xx", 175)


@pytest.mark.parametrize(("rate", "starts"), [(22_050, True), (1, True), (0, False), (-1, False)])
def test_the_library_starts_synchronous_with_the_wheels_data_or_says_to_reinstall(monkeypatch, rate, starts):
    lib = FakeLib(rate=rate)
    loader = SimpleNamespace(get_library_path=lambda: "/lib/libespeak-ng.so", get_data_path=lambda: "/data")
    monkeypatch.setitem(sys.modules, "espeakng_loader", loader)
    monkeypatch.setattr(espeak.ctypes, "CDLL", lambda path: lib)
    if starts:
        assert espeak.open_library.__wrapped__().sample_rate == rate
    else:
        with pytest.raises(EspeakError, match="did not start with its data at /data: reinstall"):
            espeak.open_library.__wrapped__()
    assert lib.calls == [("Initialize", AUDIO_OUTPUT_SYNCHRONOUS, 0, b"/data", 0)]


def test_the_programs_failure_says_what_it_wrote_to_stderr(monkeypatch, tmp_path):
    def run(args, input, capture_output=False, timeout=None):
        return subprocess.CompletedProcess(args, 1, b"", b"unknown voice" if capture_output else None)

    monkeypatch.setattr(espeak.subprocess, "run", run)
    with pytest.raises(EspeakError, match="failed \\(1\\): unknown voice"):
        EspeakProgram("/usr/bin/espeak-ng").write("Hi.", "xx", 175, tmp_path / "a.wav")
