"""The speakers' files and loading (fastvlm/speech/tts.py; sentence splitting and the fallback's retries are in
test_speech_tts.py): a WAV with no samples is no speech, one sample is, the folder is made however deep, a spoken
file deleted twice is no error, the time it took, an error's reason bounded, loading without a config."""

import pytest

from fastvlm.speech import tts
from fastvlm.speech.config import SpeechConfig
from fastvlm.speech.tts import EdgeSpeaker, EspeakSpeaker, FallbackSpeaker, SpeechUnavailable
from tests.unit.speech.test_speech_tts import FakeBackend, fake_edge_tts

HEADER = b"RIFF" + bytes(40)  # a WAV's 44-byte header


def test_a_wav_of_only_its_header_is_no_speech_and_one_sample_more_is():
    with pytest.raises(SpeechUnavailable, match="no audio"):
        EspeakSpeaker(FakeBackend(HEADER)).synthesize("Hello.")
    speech = EspeakSpeaker(FakeBackend(HEADER + bytes(2))).synthesize("Hello.")
    assert speech.path.stat().st_size == 46
    speech.delete()


def test_files_go_into_a_folder_made_however_deep_and_deleting_one_twice_is_no_error(tmp_path):
    speech = EspeakSpeaker(FakeBackend(), audio_dir=tmp_path / "a" / "b").synthesize("Hello.")
    assert speech.path.parent == tmp_path / "a" / "b"
    speech.delete()
    speech.delete()
    assert not speech.path.exists()


def test_a_speech_says_how_long_it_took(monkeypatch, tmp_path):
    clock = iter([100.0, 100.25, 200.0, 200.5])  # each speaker reads it when it begins and when it is done
    monkeypatch.setattr(tts.time, "perf_counter", lambda: next(clock))
    assert EspeakSpeaker(FakeBackend(), audio_dir=tmp_path).synthesize("Hello.").elapsed_s == 0.25

    async def save(c, path):
        with open(path, "wb") as f:
            f.write(b"mp3")

    fake_edge_tts(monkeypatch, save)
    assert EdgeSpeaker(audio_dir=tmp_path).synthesize("Hello.").elapsed_s == 0.5


def test_why_edge_tts_failed_is_said_in_at_most_200_characters(monkeypatch, tmp_path):
    async def save(c, path):
        raise ValueError("x" * 500)

    fake_edge_tts(monkeypatch, save)
    with pytest.raises(SpeechUnavailable) as e:
        EdgeSpeaker(audio_dir=tmp_path).synthesize("Hello.")
    assert str(e.value) == f"edge-tts failed (ValueError: {'x' * 188})"


def test_loading_without_a_config_uses_the_default_voices(monkeypatch):
    monkeypatch.setattr(tts, "find_backend", FakeBackend)
    defaults = SpeechConfig()
    espeak = EspeakSpeaker.load()
    assert (espeak.voice, espeak.rate) == (defaults.espeak_voice, defaults.espeak_rate)
    both = FallbackSpeaker.load()
    assert (both.primary.voice, both.fallback.voice) == (defaults.tts_voice, defaults.espeak_voice)
