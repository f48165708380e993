"""Is a spoken question finished? Judges for the semantic end of turn (`fastvlm.speech.turn`).

`TranscriptJudge` (the default) reads Whisper's transcript of the speech so far: a question that trails off
("What color is the…", "Where is", "um") is not finished. `SmartTurnJudge` hears it: Pipecat's Smart Turn v3
(Whisper-tiny encoder + a linear head, int8 ONNX, 16 kHz audio), whose weights come inside the `pipecat-ai`
wheel (BSD-2-Clause), so nothing downloads at run time. It hears intonation, which eSpeak NG's robotic
questions do not have: on them it is no better than chance (docs/speech.md), hence not the default.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import KW_ONLY, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..engine.events import ModelFileError
from .audio import RATE
from .sentences import DANGLING
from .stt import Transcript

log = logging.getLogger(__name__)

SMART_TURN_WHEEL = "pipecat-ai"
SMART_TURN_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
SMART_TURN_INSTALL = f"pip install --no-deps {SMART_TURN_WHEEL}==1.14.0 (only its ONNX file is used)"
_SMART_TURN_S = 8  # the model hears the last 8 s, zero-padded in front

# A finished English question seldom ends on a word of `DANGLING` (articles, prepositions, auxiliaries, question
# words, fillers...). "What is this?" ends on "this": finished; "Where is" is not. Some of those words do end
# common questions ("What is that?", "What am I pointing at?", "Do you know what this is?"), and Whisper hears a
# trailing "the" as "that" ("What color is the" -> "What color is that?"): such a word with a question mark after
# it is unsure, and the question ends after a longer silence (`turn_unsure_silence_ms`) than a finished one. So is
# it with a full stop or "!": people end sentences so ("I didn't know that.", "I think it might."; 5 of 43 finished
# sentences of people's speech in bench-turns waited the 2 s fallback for it, docs/speech.md).
CAN_END = frozenset("""
of on in at to for with from by about into onto behind under over near between like that
is are was were am be been do does did can could will would should shall may might must has have had not""".split())
_TRAILING = re.compile(r"(\.\.\.|…|,|-|–|—)\s*$")
_WORDS = re.compile(r"[a-z']+")


@dataclass(frozen=True)
class Verdict:
    complete: bool
    reason: str  # why, for logs and the bench ("ends on 'the'", "p=0.91")
    _: KW_ONLY  # the rest by name: a new field must not take another's value (an elapsed time once became `unsure`)
    probability: float | None = None  # the model's P(finished), where a model judged
    unsure: bool = False  # finished or not: the end waits for `turn_unsure_silence_ms`, not the usual silence
    elapsed_s: float = 0.0


class TurnJudge(Protocol):
    needs_transcript: bool  # judged after Whisper (True) or from the audio alone, at the same time (False)

    def judge(self, audio: np.ndarray, transcript: Transcript | None) -> Verdict:
        """(n,) float32 mono 16 kHz speech so far (and its transcript, if needed) -> finished or not."""
        ...


class TranscriptJudge:
    """Finished unless the transcript is empty, trails off ('...', a comma) or ends on a dangling word (unsure
    when that word, followed by '?', '.' or '!', can end a sentence)."""

    needs_transcript = True

    def judge(self, audio: np.ndarray, transcript: Transcript | None) -> Verdict:
        text = (transcript.text if transcript is not None else "").strip()
        words = _WORDS.findall(text.lower())
        if not words:
            return Verdict(False, "nothing heard yet")
        if _TRAILING.search(text):
            return Verdict(False, f"trails off: {text[-12:]!r}")
        if words[-1] in CAN_END and text.endswith(("?", ".", "!")):
            return Verdict(True, f"ends on {words[-1]!r}{text[-1]}: unsure", unsure=True)
        if words[-1] in DANGLING:
            return Verdict(False, f"ends on {words[-1]!r}")
        return Verdict(True, f"ends on {words[-1]!r}")


class SmartTurnJudge:
    """Pipecat's Smart Turn v3 on the audio: finished when P(finished) >= `threshold`."""

    needs_transcript = False

    def __init__(self, session: Any, threshold: float = 0.5) -> None:
        from faster_whisper.feature_extractor import FeatureExtractor  # the same log-mel features, numpy only

        self._session = session  # onnxruntime.InferenceSession: input_features (1, 80, 800) -> (1, 1) P(finished)
        self._features = FeatureExtractor(feature_size=80, chunk_length=_SMART_TURN_S)
        self.threshold = threshold

    @classmethod
    def load(cls, threads: int = 1, threshold: float = 0.5) -> SmartTurnJudge:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        path = smart_turn_model()
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        log.info("Smart Turn v3 loaded from %s", path)
        return cls(session, threshold)

    def judge(self, audio: np.ndarray, transcript: Transcript | None = None) -> Verdict:
        t0 = time.perf_counter()
        x = np.asarray(audio, np.float32)[-_SMART_TURN_S * RATE :]
        x = np.pad(x, (_SMART_TURN_S * RATE - x.size, 0))
        x = (x - x.mean()) / np.sqrt(x.var() + 1e-7)  # as Whisper's feature extractor with do_normalize
        features = self._features(x, padding=0)[None].astype(np.float32)  # (1, 80, 800)
        p = float(self._session.run(None, {"input_features": features})[0].reshape(-1)[0])
        return Verdict(p >= self.threshold, f"p={p:.2f}", probability=p, elapsed_s=time.perf_counter() - t0)


def smart_turn_model() -> Path:
    """Smart Turn v3's ONNX file inside the installed `pipecat-ai` wheel (found without importing pipecat)."""
    try:
        path = Path(str(metadata.distribution(SMART_TURN_WHEEL).locate_file(SMART_TURN_FILE)))
    except metadata.PackageNotFoundError:
        raise ModelFileError(f"the Smart Turn end-of-turn model needs the {SMART_TURN_WHEEL} wheel: "
                             f"{SMART_TURN_INSTALL}; or use the transcript judge") from None
    if not path.is_file():
        raise ModelFileError(f"{path} is missing from the installed {SMART_TURN_WHEEL}: {SMART_TURN_INSTALL}")
    return path


def load_judge(name: str, threads: int = 1) -> TurnJudge:
    """'transcript' or 'smart-turn' -> the judge."""
    if name == "transcript":
        return TranscriptJudge()
    if name == "smart-turn":
        return SmartTurnJudge.load(threads)
    raise ValueError(f"unknown end-of-turn judge {name!r}: use 'transcript' or 'smart-turn'")
