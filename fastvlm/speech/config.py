"""Speech settings. Only `app.py` and the CLI map flags and environment onto `SpeechConfig`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..engine.config import physical_cores


@dataclass(frozen=True)
class SpeechConfig:
    """How to hear questions (Whisper + Silero VAD) and speak answers (edge-tts, eSpeak NG offline)."""

    # --- speech to text (faster-whisper) ---
    whisper_model: str = "tiny.en"  # a faster-whisper name (tiny.en, tiny, base, ...) or a CTranslate2 model folder
    models_dir: Path | None = None  # searched for <name>/ or faster-whisper-<name>/ before anything else
    download: bool = True  # let faster-whisper fetch a named model into the Hugging Face cache if it is nowhere local
    language: str | None = None  # None: the model's default ("en" for *.en models, detected otherwise)
    compute_type: str = "int8"  # CTranslate2 compute type on the CPU
    threads: int = field(default_factory=physical_cores)
    beam_size: int = 5  # 1 = greedy; 5 hears robotic/unclear speech better at about the same cost on short questions
    max_audio_s: float = 30.0  # longer audio is cut to this (Whisper's window); the Transcript says so
    # audio up to this long (with its 0.3 s lead-in either side) is encoded in a window this long, not Whisper's
    # 30 s: ~3x faster on a question, and no worse on the bench's (docs/speech.md). 0: always 30 s
    short_window_s: float = 10.0

    # --- turn taking (Silero VAD from faster-whisper; fastvlm/speech/turn.py) ---
    end_of_turn: str = "semantic"  # semantic: a judge decides at short pauses; silence: end_silence_ms, fixed
    turn_judge: str = "transcript"  # semantic: transcript (Whisper's words) | smart-turn (Smart Turn v3 audio)
    turn_pause_ms: int = 120  # semantic: a pause this long has the question judged (200 cost ~0.1 s: docs/voice.md)
    turn_min_silence_ms: int = 200  # semantic: a finished question ends once its silence is this long
    # semantic, for a caller that begins the answer at `TurnLikelyEnded` (TurnTaker(likely_events=True)): the
    # silence that confirms the end instead. A 0.5 s pause mid-question goes on before it; the answer is ready.
    # The semantic rule's silences count from where the voice stopped, not from where the VAD heard it stop
    turn_confirm_silence_ms: int = 550
    # semantic: sound back in a pause's last 0.1 s (louder than the pause, before the VAD calls it speech) holds
    # the end up to this much longer, until the VAD says whether the person goes on (docs/speech.md)
    turn_hold_ms: int = 150
    # semantic: a question that may be finished or not ("What is that?", "What am I pointing at?": a "?" after a
    # word that can end a question but often dangles) ends after this much silence, not the fallback's
    turn_unsure_silence_ms: int = 1000
    turn_max_silence_ms: int = 2000  # semantic: an unfinished one ends anyway after this much silence
    end_silence_ms: int = 700  # silence: the silence after speech that ends an utterance
    # while a question is spoken (once its frame is prepared), Whisper hears the speech so far every this many
    # seconds of it (e.g. 0.8), and the engine prefills its words, so the answer prefills only the rest
    # (speech/ahead.py). 0: off, the default: on 2 vCPU shared with the browser it made the first sound later
    words_ahead_s: float = 0.0
    min_speech_ms: int = 250  # speech needed before `SpeechStarted` (coughs and clicks are shorter)
    speech_pad_ms: int = 400  # audio kept before the speech start and after its end (300 cut soft first words)
    vad_threshold: float = 0.5  # Silero speech probability that counts as speech

    # --- text to speech ---
    tts_voice: str = "en-US-ChristopherNeural"  # edge-tts voice (online)
    tts_timeout_s: float = 5.0  # edge-tts gives up after this, and eSpeak NG speaks instead
    espeak_voice: str = "en-us"  # eSpeak NG voice (offline)
    espeak_rate: int = 175  # eSpeak NG words per minute
    audio_dir: Path | None = None  # where spoken answers are written; None: the system temp folder

    def __post_init__(self) -> None:
        if not self.whisper_model.strip():
            raise ValueError("whisper_model must name a model (e.g. tiny.en) or a model folder")
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        if self.beam_size < 1:
            raise ValueError("beam_size must be at least 1")
        if self.max_audio_s <= 0:
            raise ValueError("max_audio_s must be positive")
        if self.short_window_s and not 1 <= self.short_window_s < 30:
            raise ValueError("short_window_s must be 0 (off) or in 1..30 seconds (Whisper's window is 30 s)")
        if self.end_silence_ms < 32 or self.min_speech_ms < 0 or self.speech_pad_ms < 0:
            raise ValueError("end_silence_ms must be >= 32 (one VAD window); min_speech_ms and speech_pad_ms >= 0")
        if self.end_of_turn not in ("semantic", "silence") or self.turn_judge not in ("transcript", "smart-turn"):
            raise ValueError("end_of_turn must be 'semantic' or 'silence'; turn_judge 'transcript' or 'smart-turn'")
        if not 32 <= self.turn_pause_ms <= self.turn_min_silence_ms < self.turn_max_silence_ms:
            raise ValueError("need 32 <= turn_pause_ms <= turn_min_silence_ms < turn_max_silence_ms")
        if not self.turn_pause_ms <= self.turn_confirm_silence_ms < self.turn_max_silence_ms:
            raise ValueError("need turn_pause_ms <= turn_confirm_silence_ms < turn_max_silence_ms")
        if not self.turn_confirm_silence_ms <= self.turn_unsure_silence_ms <= self.turn_max_silence_ms:
            raise ValueError("need turn_confirm_silence_ms <= turn_unsure_silence_ms <= turn_max_silence_ms")
        if not 0 <= self.turn_hold_ms <= 500:
            raise ValueError("turn_hold_ms must be in 0..500 (0: the end never waits for the VAD)")
        if self.words_ahead_s < 0:
            raise ValueError("words_ahead_s must be 0 (off) or positive seconds of speech")
        if not 0 < self.vad_threshold < 1:
            raise ValueError("vad_threshold must be in (0, 1)")
        if self.tts_timeout_s <= 0:
            raise ValueError("tts_timeout_s must be positive")
        if not 80 <= self.espeak_rate <= 450:
            raise ValueError("espeak_rate must be in 80..450 words per minute")
