"""What the browser journeys feed the page: upload files, a fake webcam clip, a fake microphone recording."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..journeys import Frames


def write_y4m(path: Path, width: int = 320, height: int = 240, frames: int = 30, fps: int = 10) -> Path:
    """A YUV4MPEG2 (4:2:0) clip Chromium plays as a webcam (`--use-file-for-fake-video-capture`): a bright card
    sliding over a gradient, and a bar code of the frame number so that no two frames are the same picture."""
    yy, xx = np.mgrid[0:height, 0:width]
    base = (60 + (xx + yy) * 120 // (width + height)).astype(np.uint8)  # (H, W) luma gradient
    u = np.full((height // 2, width // 2), 110, np.uint8)  # (H/2, W/2) chroma: a cool tint
    v = np.full((height // 2, width // 2), 140, np.uint8)
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for i in range(frames):
            y = base.copy()
            x0 = (i * 8) % (width - 80)
            y[height // 3: height // 3 + 60, x0: x0 + 80] = 230
            for bit in range(12):  # the frame number, 12 bits along the bottom
                y[height - 16:, bit * 16: bit * 16 + 12] = 240 if (i >> bit) & 1 else 20
            f.write(b"FRAME\n" + y.tobytes() + u.tobytes() + v.tobytes())
    return path


def write_uploads(folder: Path, count: int, seed: int) -> list[Path]:
    """`count` never-cached pictures (the engine-only journeys' `Frames`) as PNG files to upload."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    frames, paths = Frames(seed=seed), []
    for i in range(count):
        paths.append(folder / f"upload-{i}.png")
        Image.fromarray(frames()).save(paths[-1])
    return paths


@dataclass(frozen=True)
class SpokenQuestions:
    """A WAV the fake microphone loops: each question spoken in a slot of `slot_s` seconds (its first sound at
    `lead_s`, then speech and silence), so a question that starts t after the microphone opened is slot
    (t - lead) / slot."""

    path: Path
    questions: tuple[str, ...]
    slot_s: float
    lead_s: float
    spoken_s: tuple[float, ...]  # each question's first sound -> its end of speech

    def slot_at(self, speech_start_s: float) -> int:
        """The slot (counted on through the loops) in which speech heard `speech_start_s` after the microphone
        opened began (the file plays from its start when the page opens the microphone; the report's
        `mic_lead_s` shows how closely)."""
        return round((speech_start_s - self.lead_s) / self.slot_s)

    def question_at(self, speech_start_s: float) -> str:
        """The question whose speech starts `speech_start_s` after the microphone opened."""
        return self.questions[self.slot_at(speech_start_s) % len(self.questions)]

    def end_after(self, speech_start_s: float) -> float:
        """How long after its first sound the question heard starting at `speech_start_s` ends."""
        return self.spoken_s[self.slot_at(speech_start_s) % len(self.questions)]


def write_questions(path: Path, questions: tuple[str, ...], slot_s: float, lead_s: float = 0.5,
                    wpm: int = 140, voice: str = "en-us") -> SpokenQuestions:
    """Speak `questions` with eSpeak NG (as `bench-voice` does) into one WAV of equal slots. Raises
    `fastvlm.speech.espeak.EspeakError` (with its install hint) when eSpeak NG is missing."""
    from ...speech.espeak import find_backend

    backend = find_backend()
    sounds = []
    for text in questions:
        speech = backend.synthesize(text, voice, wpm)  # (n,) int16
        loud = np.flatnonzero(np.abs(speech.astype(np.int32)) > 600)  # (k,) where the voice is
        speech = speech[loud[0]: loud[-1] + 1]
        sounds.append((text, speech, speech.size / backend.sample_rate))
    return _write_slots(path, backend.sample_rate, sounds, slot_s, lead_s)


def write_people_questions(path: Path, slot_s: float, lead_s: float = 0.5) -> SpokenQuestions:
    """The 9 questions people ask in bench-turns' recordings (`bench-voice --questions people`), one per slot:
    each from its first sound the page's microphone analyser hears (peak over 0.02), which starts at `lead_s`;
    `spoken_s` runs to the label's end of speech (a breath or the room may sound after it). Raises
    `fastvlm.bench.people.recordings.PeopleMissing` when the recordings are not downloaded."""
    from ..people.recordings import RATE, questions

    sounds = []
    for audio, end_s, text, _ in questions():
        first = int(np.flatnonzero(np.abs(audio) > 0.02)[0])  # the lead before it is silence: digital zeros
        last = int(np.flatnonzero(audio)[-1]) + 1  # the tail after it is silence too
        sounds.append((text, audio[first:last], end_s - first / RATE))
    return _write_slots(path, RATE, sounds, slot_s, lead_s)


def _write_slots(path: Path, rate: int, sounds: list[tuple[str, np.ndarray, float]], slot_s: float,
                 lead_s: float) -> SpokenQuestions:
    """(text, (n,) samples from the first sound, first sound -> end of speech s) -> one WAV of equal slots."""
    from ...speech.audio import write_wav

    slots = []
    for text, speech, _ in sounds:
        slot = np.zeros(int(rate * slot_s), speech.dtype)
        if speech.size > slot.size - int(rate * (lead_s + 1.0)):
            raise ValueError(f"the question {text!r} does not fit a {slot_s} s slot: lengthen the slot")
        start = int(rate * lead_s)
        slot[start: start + speech.size] = speech
        slots.append(slot)
    write_wav(path, rate, np.concatenate(slots))
    return SpokenQuestions(path, tuple(t for t, _, _ in sounds), slot_s, lead_s,
                           tuple(float(s) for _, _, s in sounds))  # numbers JSON can write


class ReferenceSpeaker:
    """The app's speaker as the browser journeys give it: whatever the random weights said, it says `piece` (the
    reference answer's first spoken piece, "You are holding") and repeats that sound to `length_s`.

    Random weights' first piece is 5 tokens like " w129077 w9375", which eSpeak NG reads out as ~13 s of numbers
    and synthesizes 3-30x slower than the 2-word phrase a real answer begins with; the engine-only voice journey
    speaks the reference piece for the same reason. The repeats keep each answer sounding as long as before, so
    that the next question, the barge-in walk and the echo walk still talk over a playing answer."""

    def __init__(self, speaker, piece: str, length_s: float = 13.0) -> None:
        self.speaker, self.piece, self.length_s = speaker, piece, length_s

    def synthesize(self, text: str):
        speech = self.speaker.synthesize(self.piece)
        if speech.path.suffix.lower() == ".wav":
            repeat_wav(speech.path, self.length_s)
        return speech


def repeat_wav(path: Path, length_s: float) -> None:
    """Rewrite the WAV at `path` as its sound repeated until it lasts at least `length_s`."""
    import wave

    with wave.open(str(path), "rb") as w:
        params, frames = w.getparams(), w.readframes(w.getnframes())
    if params.nframes == 0:
        return
    times = max(1, int(np.ceil(length_s * params.framerate / params.nframes)))
    with wave.open(str(path), "wb") as w:
        w.setparams(params)
        w.writeframes(frames * times)
