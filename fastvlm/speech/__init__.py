"""Hands-free voice Q&A: hear a question (Silero VAD + Whisper), speak the answer (edge-tts or eSpeak NG).

Nothing here loads a model on import; `WhisperTranscriber.load()`, `silero_vad()` and
`FallbackSpeaker.load()` do. No Gradio here: the UI tab builds on these.
"""

from .audio import rms, to_mono_16k
from .config import SpeechConfig
from .sentences import SentenceChunker, split_sentences
from .stt import Transcriber, Transcript, WhisperTranscriber, resolve_whisper_model, word_error_rate
from .tts import EdgeSpeaker, EspeakSpeaker, FallbackSpeaker, Speaker, Speech, SpeechUnavailable, remove_old_audio
from .vad import SileroVad, SpeechStarted, TurnDetector, TurnEvent, UtteranceEnded, VadModel, silero_vad

__all__ = [
    "EdgeSpeaker", "EspeakSpeaker", "FallbackSpeaker", "SentenceChunker", "SileroVad", "Speaker", "Speech",
    "SpeechConfig", "SpeechStarted", "SpeechUnavailable", "Transcriber", "Transcript", "TurnDetector",
    "TurnEvent", "UtteranceEnded", "VadModel", "WhisperTranscriber", "remove_old_audio", "resolve_whisper_model",
    "rms", "silero_vad", "split_sentences", "to_mono_16k", "word_error_rate",
]  # fmt: skip
