"""What the browser journeys feed Chromium, checked without a browser: the fake webcam's Y4M clip, the fake
microphone's WAV of questions in equal slots (and which question a heard speech start belongs to), the uploads,
and the reference speaker's repeated sound."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from fastvlm.bench.browser import media
from fastvlm.speech.audio import read_wav, write_wav


def test_the_webcam_clip_is_y4m_420_with_every_frame_different(tmp_path):
    path = media.write_y4m(tmp_path / "cam.y4m", width=320, height=240, frames=5, fps=10)
    data = path.read_bytes()
    header, rest = data.split(b"\n", 1)
    assert header == b"YUV4MPEG2 W320 H240 F10:1 Ip A1:1 C420jpeg"
    frame = 320 * 240 * 3 // 2  # Y, then U and V at half width and height
    assert len(rest) == 5 * (len(b"FRAME\n") + frame)
    frames = [rest[i * (6 + frame) + 6: (i + 1) * (6 + frame)] for i in range(5)]
    assert all(rest[i * (6 + frame): i * (6 + frame) + 6] == b"FRAME\n" for i in range(5))
    assert len(set(frames)) == 5
    lumas = [np.frombuffer(f[:320 * 240], np.uint8).reshape(240, 320) for f in frames]
    bits = [[int(y[-8, b * 16 + 6] > 128) for b in range(12)] for y in lumas]  # the frame number along the bottom
    assert [sum(bit << i for i, bit in enumerate(row)) for row in bits] == [0, 1, 2, 3, 4]
    assert lumas[1][240 // 3 + 30, 84] == 230 and lumas[0][240 // 3 + 30, 84] != 230  # the card moved 8 px


def test_uploads_are_new_pictures(tmp_path):
    paths = media.write_uploads(tmp_path / "bench" / "up", 3, seed=0)  # folders made
    assert [p.name for p in paths] == ["upload-0.png", "upload-1.png", "upload-2.png"]
    pictures = [np.asarray(Image.open(p)) for p in paths]
    assert len({p.tobytes() for p in pictures}) == 3


class FakeVoice:
    """eSpeak NG's stand-in: 0.1 s of hush, then a tone of 0.05 s per character, then 0.2 s of hush."""

    sample_rate = 1000

    def synthesize(self, text, voice, wpm):
        tone = (8000 * np.sin(np.arange(50 * len(text)) * 0.9)).astype(np.int16)
        tone[0] = tone[-1] = 8000  # loud at both ends, so the trim keeps it whole
        return np.concatenate([np.full(100, 300, np.int16), tone, np.zeros(200, np.int16)])


@pytest.fixture
def voice(monkeypatch):
    import fastvlm.speech.espeak as espeak

    monkeypatch.setattr(espeak, "find_backend", lambda: FakeVoice())


def test_questions_are_spoken_in_equal_slots_from_the_lead(voice, tmp_path):
    spoken = media.write_questions(tmp_path / "q.wav", ("Hi?", "What is it?"), slot_s=3.0, lead_s=0.5)
    rate, pcm = read_wav(spoken.path)
    assert rate == 1000 and pcm.size == 2 * 3000
    assert spoken.spoken_s == (0.15, 0.55)  # the hush trimmed away
    for slot, length in enumerate((150, 550)):
        part = pcm[slot * 3000: (slot + 1) * 3000]
        loud = np.flatnonzero(np.abs(part.astype(np.int32)) > 600)
        assert (loud[0], loud[-1] + 1) == (500, 500 + length)


def test_a_question_too_long_for_its_slot_is_refused(voice, tmp_path):
    media.write_questions(tmp_path / "q.wav", ("x" * 10,), slot_s=2.0, lead_s=0.5)  # 0.5 s: fits with 1 s to spare
    with pytest.raises(ValueError, match="does not fit a 2.0 s slot"):
        media.write_questions(tmp_path / "q.wav", ("x" * 11,), slot_s=2.0, lead_s=0.5)


def test_a_heard_start_names_its_slots_question():
    spoken = media.SpokenQuestions(Path("q.wav"), ("a", "b", "c"), slot_s=14.0, lead_s=0.5, spoken_s=(1, 1, 1))
    assert [spoken.question_at(t) for t in (0.5, 0.2, 6.9, 14.5, 21.6, 28.5, 42.5, 56.5)] == \
        ["a", "a", "a", "b", "c", "c", "a", "b"]  # the file loops


def test_the_reference_speaker_says_its_piece_as_long_as_an_answer(tmp_path):
    wav = tmp_path / "piece.wav"
    said = []

    def synthesize(text):
        said.append(text)
        write_wav(wav, 1000, np.arange(300, dtype=np.int16))
        return SimpleNamespace(path=wav)

    speaker = media.ReferenceSpeaker(SimpleNamespace(synthesize=synthesize), "You are holding", length_s=1.0)
    assert speaker.synthesize(" w129077 w9375").path == wav and said == ["You are holding"]
    rate, pcm = read_wav(wav)
    assert pcm.size == 1200 and np.array_equal(pcm[900:], np.arange(300))  # 4 repeats: the first to reach 1 s


def test_an_empty_or_long_enough_sound_is_left_alone(tmp_path):
    write_wav(tmp_path / "empty.wav", 1000, np.zeros(0, np.int16))
    media.repeat_wav(tmp_path / "empty.wav", 5.0)
    assert read_wav(tmp_path / "empty.wav")[1].size == 0
    write_wav(tmp_path / "long.wav", 1000, np.ones(1500, np.int16))
    media.repeat_wav(tmp_path / "long.wav", 1.0)
    assert read_wav(tmp_path / "long.wav")[1].size == 1500


def test_peoples_questions_start_at_the_lead_from_their_first_sound(monkeypatch, tmp_path):
    """A recording's question carries a soft onset and a breath after its labelled end: the slot starts at its first
    sound the page's analyser hears (over 0.02), and its end of speech is the label's, counted from that sound."""
    from fastvlm.bench.people import recordings

    rate = recordings.RATE
    audio = np.zeros(rate * 4, np.float32)  # 0.5 s lead, then 0.01 of hush, speech 0.6-2.0 s, a breath to 2.3 s
    audio[rate // 2: rate * 6 // 10] = 0.01
    audio[rate * 6 // 10: rate * 2] = 0.3
    audio[rate * 2: rate * 23 // 10] = 0.05
    monkeypatch.setattr(recordings, "questions", lambda: [(audio, 2.0, "Who is it?", 0.58)])
    spoken = media.write_people_questions(tmp_path / "p.wav", slot_s=4.0, lead_s=0.5)
    got_rate, pcm = read_wav(spoken.path)
    assert got_rate == rate and pcm.size == 4 * rate
    loud = np.flatnonzero(np.abs(pcm) > 0.02 * 32767)
    assert (loud[0], loud[-1] + 1) == (rate // 2, rate // 2 + rate * 17 // 10)  # 0.5 s: from 0.6 s to the breath's end
    assert spoken.questions == ("Who is it?",) and spoken.spoken_s == (pytest.approx(1.4),)
    assert spoken.end_after(0.51) == pytest.approx(1.4) and spoken.slot_at(4.52) == 1


def test_a_persons_question_too_long_for_its_slot_is_refused(monkeypatch, tmp_path):
    from fastvlm.bench.people import recordings

    audio = np.full(recordings.RATE * 3, 0.3, np.float32)
    monkeypatch.setattr(recordings, "questions", lambda: [(audio, 3.0, "Long?", 0.0)])
    with pytest.raises(ValueError, match="'Long\\?' does not fit a 4.0 s slot"):
        media.write_people_questions(tmp_path / "p.wav", slot_s=4.0, lead_s=0.5)


def test_voice_rows_are_json_whatever_numbers_the_questions_lengths_are(voice, tmp_path):
    """eSpeak's lengths are numpy numbers: the report's rows (a numpy bool `cut` broke it) and slots stay JSON."""
    import json

    from fastvlm.bench.browser import walks

    spoken = media.SpokenQuestions(Path("q.wav"), ("Hi?",), 10.0, 0.5, (np.float64(1.5),))
    rec = {"mic_opened": 0.0, "speech_starts": [0.5], "speech_ends": [2.0], "plays": [2.6], "log": []}
    assert json.loads(json.dumps(walks._voice_rows(rec, spoken)))[0]["cut"] is False
    written = media.write_questions(tmp_path / "q.wav", ("Hi?",), slot_s=3.0, lead_s=0.5)
    assert json.loads(json.dumps(written.spoken_s)) == [pytest.approx(written.spoken_s[0])]
