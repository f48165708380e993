"""`SpeechConfig`'s limits at their edges: each accepts its last good value and refuses the first bad one, with
every other setting at its default."""

import pytest

from fastvlm.speech.config import SpeechConfig

ACCEPTED = [
    {"threads": 1}, {"beam_size": 1}, {"max_audio_s": 0.5}, {"short_window_s": 1}, {"short_window_s": 29.5},
    {"end_silence_ms": 32}, {"min_speech_ms": 0}, {"speech_pad_ms": 0},
    {"end_of_turn": "silence", "turn_judge": "smart-turn"},
    {"turn_pause_ms": 32}, {"turn_pause_ms": 200, "turn_min_silence_ms": 200}, {"turn_min_silence_ms": 1999},
    {"turn_confirm_silence_ms": 120, "turn_unsure_silence_ms": 120},  # as short as the pause
    {"turn_unsure_silence_ms": 550}, {"turn_unsure_silence_ms": 2000},  # as the confirm; as the fallback
    {"turn_hold_ms": 0}, {"turn_hold_ms": 500}, {"vad_threshold": 0.01}, {"vad_threshold": 0.99},
    {"tts_timeout_s": 0.5}, {"espeak_rate": 80}, {"espeak_rate": 450}, {"words_ahead_s": 0},
]
REFUSED = [
    ({"threads": 0}, "threads"), ({"beam_size": 0}, "beam_size"), ({"max_audio_s": 0}, "max_audio_s"),
    ({"short_window_s": 0.99}, "short_window_s"), ({"end_silence_ms": 31}, "end_silence_ms"),
    ({"min_speech_ms": -1}, "min_speech_ms"), ({"speech_pad_ms": -1}, "speech_pad_ms"),
    ({"end_of_turn": "vad"}, "end_of_turn"), ({"turn_judge": "whisper"}, "turn_judge"),
    ({"turn_pause_ms": 31}, "turn_pause_ms"), ({"turn_pause_ms": 201}, "turn_min_silence_ms"),
    ({"turn_min_silence_ms": 2000}, "turn_min_silence_ms < turn_max"),
    ({"turn_confirm_silence_ms": 119}, "turn_confirm_silence_ms"),
    ({"turn_confirm_silence_ms": 2000, "turn_unsure_silence_ms": 2000}, "turn_confirm_silence_ms < turn_max"),
    ({"turn_unsure_silence_ms": 549}, "turn_unsure_silence_ms"), ({"turn_unsure_silence_ms": 2001}, "turn_unsure"),
    ({"turn_hold_ms": -1}, "turn_hold_ms"), ({"turn_hold_ms": 501}, "turn_hold_ms"),
    ({"vad_threshold": 0}, "vad_threshold"), ({"vad_threshold": 1}, "vad_threshold"),
    ({"tts_timeout_s": 0}, "tts_timeout_s"), ({"espeak_rate": 79}, "espeak_rate"),
    ({"espeak_rate": 451}, "espeak_rate"),
    ({"words_ahead_s": -0.1}, "words_ahead_s"), ({"whisper_model": " "}, "whisper_model"),
]


@pytest.mark.parametrize("settings", ACCEPTED, ids=str)
def test_the_last_good_value_of_each_limit_is_accepted(settings):
    SpeechConfig(**settings)


@pytest.mark.parametrize(("settings", "named"), REFUSED, ids=str)
def test_the_first_bad_value_of_each_limit_is_refused_by_name(settings, named):
    with pytest.raises(ValueError, match=named):
        SpeechConfig(**settings)
