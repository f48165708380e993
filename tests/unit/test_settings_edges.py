"""Every settings dataclass's limits at their edges (`SpeechConfig`, `AppSettings`, `ApiSettings`, `EngineConfig`,
`GenerationOptions`): each accepts its last good value and refuses the first bad one, naming it, with every other
setting at its default. The resolution, the context's message and the default thread count:
tests/unit/engine/test_config_edges.py."""

import pytest

from fastvlm.api.settings import ApiSettings
from fastvlm.engine.config import MIN_N_CTX, EngineConfig, GenerationOptions
from fastvlm.speech.config import SpeechConfig
from ui.settings import AppSettings

SPEECH_ACCEPTED = [
    {"threads": 1}, {"beam_size": 1}, {"max_audio_s": 0.5}, {"short_window_s": 1}, {"short_window_s": 29.5},
    {"end_silence_ms": 32}, {"min_speech_ms": 0}, {"speech_pad_ms": 0},
    {"end_of_turn": "silence", "turn_judge": "smart-turn"},
    {"turn_pause_ms": 32}, {"turn_pause_ms": 200, "turn_min_silence_ms": 200}, {"turn_min_silence_ms": 1999},
    {"turn_confirm_silence_ms": 120, "turn_unsure_silence_ms": 120},  # as short as the pause
    {"turn_unsure_silence_ms": 550}, {"turn_unsure_silence_ms": 2000},  # as the confirm; as the fallback
    {"turn_hold_ms": 0}, {"turn_hold_ms": 500}, {"vad_threshold": 0.01}, {"vad_threshold": 0.99},
    {"tts_timeout_s": 0.5}, {"espeak_rate": 80}, {"espeak_rate": 450}, {"words_ahead_s": 0},
]
SPEECH_REFUSED = [
    ({"threads": 0}, "threads"), ({"beam_size": 0}, "beam_size"), ({"max_audio_s": 0}, "max_audio_s"),
    ({"short_window_s": 0.99}, "short_window_s"), ({"short_window_s": 30}, "short_window_s"),
    ({"end_silence_ms": 31}, "end_silence_ms"),
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
APP_ACCEPTED = [
    {"live_interval_s": 1}, {"live_interval_s": 10}, {"max_new_tokens": 1}, {"max_new_tokens": 1024},
    {"voice_chunk_s": 0.02}, {"voice_chunk_s": 1}, {"voice_barge_in_ms": 32}, {"voice_resume_s": 0},
    {"voice_resume_s": 5}, {"voice_echo_settle_s": 0}, {"voice_echo_settle_s": 5}, {"voice_echo_speech_ms": 0},
    {"voice_early_stt_ms": 0}, {"voice_early_stt_ms": 32}, {"max_waiting_per_client": 0}, {"max_frame_decodes": 1},
    {"cache_sweep_s": 1}, {"cache_max_age_s": 1}, {"cache_max_bytes": 0}, {"voice_first_phrase_words": 0},
    {"voice_max_recording_s": 0.5}, {"voice_history_turns": 0}, {"voice_keep_audio": 1},
    {"voice_max_new_tokens": 1},
]
APP_REFUSED = [
    ({"live_interval_s": 0.99}, "live_interval_s"), ({"live_interval_s": 10.01}, "live_interval_s"),
    ({"max_new_tokens": 0}, "max_new_tokens"), ({"max_new_tokens": 1025}, "max_new_tokens"),
    ({"voice_chunk_s": 0.019}, "voice_chunk_s"), ({"voice_chunk_s": 1.01}, "voice_chunk_s"),
    ({"voice_barge_in_ms": 31}, "voice_barge_in_ms"), ({"voice_resume_s": -0.01}, "voice_resume_s"),
    ({"voice_resume_s": 5.01}, "voice_resume_s"), ({"voice_echo_settle_s": -0.01}, "voice_echo_settle_s"),
    ({"voice_echo_settle_s": 5.01}, "voice_echo_settle_s"), ({"voice_echo_speech_ms": -1}, "voice_echo_speech_ms"),
    ({"voice_early_stt_ms": 31}, "voice_early_stt_ms"), ({"max_waiting_per_client": -1}, "max_waiting_per_client"),
    ({"max_frame_decodes": 0}, "max_frame_decodes"), ({"cache_sweep_s": 0}, "cache_sweep_s"),
    ({"cache_max_age_s": 0}, "cache_max_age_s"), ({"cache_max_bytes": -1}, "cache_max_bytes"),
    ({"voice_first_phrase_words": -1}, "voice_first_phrase_words"),
    ({"voice_max_recording_s": 0}, "voice_max_recording_s"), ({"voice_history_turns": -1}, "voice_history_turns"),
    ({"voice_keep_audio": 0}, "voice_keep_audio"), ({"voice_max_new_tokens": 0}, "voice_max_new_tokens"),
]
API_ACCEPTED = [
    {"queue_wait_s": 0}, {"max_waiting": 0}, {"max_per_client": 0}, {"max_body_bytes": 1}, {"max_decoding": 1},
    {"api_key": "k"}, {"trusted_proxies": ("10.0.0.0/8", "::1", "10.0.0.1/8")},
    {"forwarded_header": "forwarded"},
]
API_REFUSED = [
    ({"queue_wait_s": -0.01}, "queue_wait_s"), ({"max_waiting": -1}, "max_waiting"),
    ({"max_per_client": -1}, "max_per_client"), ({"max_body_bytes": 0}, "max_body_bytes"),
    ({"max_decoding": 0}, "max_decoding"), ({"api_key": " "}, "api_key is empty"),
    ({"trusted_proxies": ("proxy",)}, "'proxy' is not an IP address"),
    ({"forwarded_header": "via"}, "'via' is not one of"),
]

ENGINE_ACCEPTED = [{"threads": 1}, {"n_ctx": MIN_N_CTX}, {"n_batch": 1}]
ENGINE_REFUSED = [({"threads": 0}, "threads"), ({"n_ctx": MIN_N_CTX - 1}, "n_ctx"), ({"n_batch": 0}, "n_batch"),
                  ({"resolution": 32}, "resolution")]
GENERATION_ACCEPTED = [{"max_new_tokens": 1}, {"temperature": 0}, {"top_p": 1.0}, {"top_p": 0.01}]
GENERATION_REFUSED = [({"max_new_tokens": 0}, "max_new_tokens"), ({"temperature": -0.01}, "temperature"),
                      ({"top_p": 0}, "top_p"), ({"top_p": 1.01}, "top_p")]

KINDS = {SpeechConfig: (SPEECH_ACCEPTED, SPEECH_REFUSED), AppSettings: (APP_ACCEPTED, APP_REFUSED),
         ApiSettings: (API_ACCEPTED, API_REFUSED), EngineConfig: (ENGINE_ACCEPTED, ENGINE_REFUSED),
         GenerationOptions: (GENERATION_ACCEPTED, GENERATION_REFUSED)}


def make(kind, settings):
    files = {"vision_path": "v.onnx", "llm_path": "m.gguf"} if kind is EngineConfig else {}
    return kind(**files, **settings)


@pytest.mark.parametrize(("kind", "settings"), [(k, s) for k, (ok, _) in KINDS.items() for s in ok], ids=str)
def test_the_last_good_value_of_each_limit_is_accepted(kind, settings):
    make(kind, settings)


@pytest.mark.parametrize(("kind", "settings", "named"),
                         [(k, s, n) for k, (_, bad) in KINDS.items() for s, n in bad], ids=str)
def test_the_first_bad_value_of_each_limit_is_refused_by_name(kind, settings, named):
    with pytest.raises(ValueError, match=named):
        make(kind, settings)
