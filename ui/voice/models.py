"""The speech models every voice session shares: Whisper, the speaker (edge-tts, eSpeak NG offline), Silero VAD
and the end-of-turn judge, loaded once (`SpeechModels.load`); or why voice is unavailable."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from fastvlm.speech import (
    Speaker,
    Speech,
    SpeechConfig,
    SpeechUnavailable,
    Transcriber,
    TranscriptJudge,
    TurnJudge,
    TurnTaker,
    VadModel,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VoiceUnavailable:
    """Speech models could not be loaded; the voice tab shows `reason` and the other tabs work."""

    reason: str


class _NoVoice:
    """Stands in for eSpeak NG when it is missing, so edge-tts still speaks and its failure says both reasons."""

    engine = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def synthesize(self, text: str) -> Speech:
        raise SpeechUnavailable(self.reason)


@dataclass(frozen=True)
class SpeechModels:
    """What every voice session shares: Whisper, the speaker (edge-tts, eSpeak NG offline), Silero VAD and the
    end-of-turn judge (None: the transcript judge, which needs no model of its own)."""

    transcriber: Transcriber
    speaker: Speaker
    vad: VadModel
    config: SpeechConfig = field(default_factory=SpeechConfig)
    about: str = ""  # one line for the page: which models hear and speak
    judge: TurnJudge | None = None

    @classmethod
    def load(cls, config: SpeechConfig) -> SpeechModels:
        from fastvlm.speech import (
            EdgeSpeaker,
            EspeakSpeaker,
            FallbackSpeaker,
            WhisperTranscriber,
            load_judge,
            silero_vad,
        )

        transcriber = WhisperTranscriber.load(config)
        judge = load_judge(config.turn_judge) if config.end_of_turn == "semantic" else None
        try:
            offline: Speaker = EspeakSpeaker.load(config)
        except SpeechUnavailable as e:
            log.warning("no offline voice: %s", e)
            offline = _NoVoice(f"no offline voice: {e}")
        speaker = FallbackSpeaker(EdgeSpeaker.from_config(config), offline)
        about = (f"Whisper {config.whisper_model} ({transcriber.source}) · voice {config.tts_voice} (edge-tts), "
                 f"offline {config.espeak_voice} (eSpeak NG)")
        return cls(transcriber, speaker, silero_vad(), config, about, judge)

    def turn_taker(self, early_stt_ms: int = 300, rule: str | None = None, likely_events: bool = False,
                   onsets: bool = False) -> TurnTaker:
        """A new person's turn taking: `rule` (default `config.end_of_turn`); `early_stt_ms` for the silence rule;
        `likely_events`: the question is answered at the judge's verdict and heard once its end is confirmed;
        `onsets`: the question's frame is taken at the first sound of speech (`SpeechOnset`)."""
        return TurnTaker(self.vad, self.transcriber, self.config, self.judge or TranscriptJudge(), rule, early_stt_ms,
                         likely_events, onsets)
