"""Whisper on a short window (fastvlm/speech/whisper_window.py) around a fake model (the real tiny.en:
tests/integration/test_speech_models.py): the mel window's size, what fits in it, the language, the token budget,
what the decoder is asked, and faster-whisper's no-speech rule at its edges."""

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from fastvlm.speech.whisper_window import Info, WindowedWhisper

RATE, HOP = 16_000, 160
PROMPT = [50257, 50362, 50363]


class Tokens:
    def decode(self, tokens):
        return " ".join(map(str, tokens))


class Decoder:
    """`model.model`: encodes what it is given, detects `detected`, answers `tokens` with `score` and `no_speech`."""

    def __init__(self, multilingual=False, detected="<|de|>", tokens=(7, 8, 9), score=-0.5, no_speech=0.1):
        self.is_multilingual, self.detected = multilingual, detected
        self.tokens, self.score, self.no_speech = list(tokens), score, no_speech
        self.encoded, self.asked = None, None

    def encode(self, mel):
        self.encoded = mel
        return "encoded"

    def detect_language(self, encoded):
        return [[(self.detected, 0.9)]]

    def generate(self, encoded, prompts, **options):
        self.asked = (prompts, options)
        return [SimpleNamespace(sequences_ids=[self.tokens], scores=[self.score], no_speech_prob=self.no_speech)]


@pytest.fixture
def whisper(monkeypatch):
    """A WindowedWhisper whose features are the audio's frames (one row, one value a frame: its first sample)."""
    pytest.importorskip("faster_whisper.vad")  # imported with the real ctranslate2, before the fake replaces it
    monkeypatch.setitem(sys.modules, "ctranslate2", SimpleNamespace(StorageView=SimpleNamespace(from_array=np.copy)))
    model = SimpleNamespace(model=Decoder(), feature_extractor=lambda audio: audio[None, ::HOP].copy())
    windowed = WindowedWhisper(model)
    monkeypatch.setattr(windowed, "_prompt", lambda language: (Tokens(), PROMPT, [1, 2]))
    return windowed


def ramp(seconds):
    return np.arange(int(seconds * RATE), dtype=np.float32) / RATE


def window(whisper, audio, window_s=10.0, **options):
    return whisper.transcribe_window(audio, window_s, vad_filter=False, **options)


def test_the_mel_is_the_window_long_in_frames_with_the_features_less_their_last_frame_and_zeros_after(whisper):
    audio = ramp(2.0)
    window(whisper, audio)
    mel = whisper.model.model.encoded
    assert mel.shape == (1, 1, 1000)  # 10 s at 100 frames a second
    features = audio[::HOP][:-1]
    assert np.array_equal(mel[0, 0, : features.size], features) and not mel[0, 0, features.size :].any()


def test_a_window_of_an_odd_number_of_frames_takes_one_more(whisper):
    window(whisper, ramp(1.0), window_s=10.01)
    assert whisper.model.model.encoded.shape[-1] == 1002  # the encoder's first convolution has stride 2


def test_audio_exactly_the_windows_length_fits_and_a_sample_more_does_not(whisper):
    window(whisper, ramp(10.0))
    with pytest.raises(ValueError, match="10.0 s of audio does not fit a 10.0 s window"):
        window(whisper, np.zeros(10 * RATE + 1, np.float32))


def test_no_audio_is_nothing_heard_in_the_language_asked_or_english(whisper):
    assert window(whisper, np.zeros(0, np.float32), language="fr") == ([], Info("fr"))
    assert window(whisper, np.zeros(0, np.float32)) == ([], Info("en"))
    assert whisper.model.model.encoded is None


@pytest.mark.parametrize(("multilingual", "asked", "language"), [(True, None, "de"), (False, None, "en"),
                                                                 (True, "fr", "fr")])
def test_the_language_is_the_one_asked_else_detected_by_a_multilingual_model_else_english(
        whisper, multilingual, asked, language):
    whisper.model.model.is_multilingual = multilingual
    assert window(whisper, ramp(1.0), language=asked)[1].language == language


def test_the_decoder_gets_a_budget_of_about_three_times_what_speech_says_within_whispers_448(whisper):
    window(whisper, ramp(2.0), beam_size=3)
    prompts, options = whisper.model.model.asked
    assert prompts == [PROMPT] and options["max_length"] == len(PROMPT) + 16 + 20
    assert (options["beam_size"], options["return_scores"], options["return_no_speech_prob"]) == (3, True, True)
    assert options["suppress_blank"] is True and options["suppress_tokens"] == [1, 2]
    long_prompt = list(range(200))
    whisper._prompt = lambda language: (Tokens(), long_prompt, [])
    window(whisper, ramp(30.0), window_s=30.0)
    assert whisper.model.model.asked[1]["max_length"] == 448


@pytest.mark.parametrize(("no_speech", "mean", "heard"), [(0.61, -1.01, False), (0.6, -1.01, True),
                                                          (0.61, -1.0, True), (0.1, -3.0, True)])
def test_a_segment_is_dropped_only_when_both_likely_silent_and_unlikely(whisper, no_speech, mean, heard):
    decoder = whisper.model.model
    decoder.no_speech = no_speech
    decoder.score = mean * 4 / 3  # faster-whisper's mean: score * tokens / (tokens + 1), 3 tokens
    segments, _ = window(whisper, ramp(1.0))
    assert bool(segments) is heard
    if heard:
        assert segments[0].text == "7 8 9" and segments[0].avg_logprob == pytest.approx(mean)
