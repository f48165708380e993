"""Hands-free voice Q&A: hear a question (Silero VAD + Whisper), know when it is over (`TurnTaker`: a judge
at short pauses, or a fixed silence), speak the answer (edge-tts or eSpeak NG).

Nothing here loads a model on import; `WhisperTranscriber.load()`, `silero_vad()`, `load_judge()` and
`FallbackSpeaker.load()` do. No Gradio here: the UI tab builds on these.
"""

from .ahead import HeardSoFar
from .audio import rms, to_mono_16k
from .config import SpeechConfig
from .judge import SmartTurnJudge, TranscriptJudge, TurnJudge, Verdict, load_judge
from .sentences import SentenceChunker, split_sentences
from .stt import Transcriber, Transcript, WhisperTranscriber, resolve_whisper_model, word_error_rate
from .tts import EdgeSpeaker, EspeakSpeaker, FallbackSpeaker, Speaker, Speech, SpeechUnavailable, remove_old_audio
from .silero import SileroVad, silero_vad
from .turn import TurnEnded, TurnTaker
from .vad import (
                  Paused,
                  SpeechOnset,
                  SpeechStarted,
                  TurnDetector,
                  TurnEvent,
                  UtteranceEnded,
)
from .vad_stream import VadModel

__all__ = [
    "EdgeSpeaker", "EspeakSpeaker", "FallbackSpeaker", "HeardSoFar", "Paused", "SentenceChunker", "SileroVad",
    "SmartTurnJudge", "Speaker", "Speech", "SpeechConfig", "SpeechOnset", "SpeechStarted", "SpeechUnavailable",
    "Transcriber", "Transcript", "TranscriptJudge", "TurnDetector", "TurnEnded", "TurnEvent", "TurnJudge",
    "TurnTaker", "UtteranceEnded", "VadModel", "Verdict", "WhisperTranscriber", "load_judge", "remove_old_audio",
    "resolve_whisper_model", "rms", "silero_vad", "split_sentences", "to_mono_16k", "word_error_rate",
]  # fmt: skip
