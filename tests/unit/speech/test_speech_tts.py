import asyncio
import os
import sys
import time
import types

import pytest

from fastvlm.engine.events import InputError
from fastvlm.speech.sentences import SentenceChunker, split_sentences
from fastvlm.speech.tts import (PREFIX, EdgeSpeaker, EspeakSpeaker, FallbackSpeaker, Speech, SpeechUnavailable,
                                remove_old_audio)  # fmt: skip


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("You hold a cup. It is red! Want more? Yes.", ["You hold a cup.", "It is red!", "Want more?", "Yes."]),
        ("Dr. Smith paid $3.50 for it. Then he left.", ["Dr. Smith paid $3.50 for it.", "Then he left."]),
        ("Fruit, e.g. apples, i.e. food. Done.", ["Fruit, e.g. apples, i.e. food.", "Done."]),
        ("J. R. R. Tolkien wrote it. Yes.", ["J. R. R. Tolkien wrote it.", "Yes."]),
        ("There are 3. They are tall.", ["There are 3.", "They are tall."]),
        ("Items:\n1. Apples\n2. Pears", ["Items:", "1. Apples", "2. Pears"]),
        ('He said "hi." Then "bye!" And left', ['He said "hi."', 'Then "bye!"', "And left"]),
        ("Wait... no. It is fine.", ["Wait... no.", "It is fine."]),
        ("Is it a dog? No. It is a cat, see No. 5.", ["Is it a dog?", "No.", "It is a cat, see No. 5."]),
        ("Pi is 3.14159 roughly", ["Pi is 3.14159 roughly"]),
    ],
)
def test_sentences_are_split_where_a_reader_would(text, sentences):
    for step in (1, 3, len(text)):
        assert list(split_sentences(text[i : i + step] for i in range(0, len(text), step))) == sentences


def test_a_sentence_is_released_as_soon_as_it_is_complete():
    c = SentenceChunker()
    assert c.feed("What a nice") == []
    assert c.feed(" day!") == []  # "!" may still be followed by more "!!" or a quote
    assert c.feed(" The") == ["What a nice day!"]
    assert c.feed(" sun. ") == []  # "sun. e.g." or "sun. The"? wait for the next letter
    assert c.feed("It") == ["The sun."]
    assert c.flush() == "It" and c.flush() is None
    assert c.feed(" Is it red? ") == ["Is it red?"]  # "?" and "!" end a sentence at once, unlike "."
    assert c.feed("yes! ") == ["yes!"]  # whatever follows


def test_first_sentence_comes_before_the_stream_ends():
    consumed = []

    def deltas():
        for d in ["I see a cat", ". It sits", " on a mat. It", " sleeps."]:
            consumed.append(d)
            yield d

    first = next(split_sentences(deltas()))
    assert first == "I see a cat." and len(consumed) == 2


def pieces(text: str, first_phrase_words: int = 3) -> tuple[list[str], int | None]:
    """`text` fed a word at a time (as tokens arrive) -> (pieces, the word count when the first was released)."""
    c, out, at = SentenceChunker(first_phrase_words=first_phrase_words), [], None
    for n, word in enumerate(text.split(" "), 1):
        out += c.feed(word if n == 1 else " " + word)
        at = at or (n if out else None)
    return out + [r for r in [c.flush()] if r], at


@pytest.mark.parametrize(
    "text, expected",
    [
        ("You are holding a red mug. It looks full.", ["You are holding", "a red mug.", "It looks full."]),
        ("The image shows a man with a cup and a dog.", ["The image shows", "a man with a cup and a dog."]),
        ("There is a dog on the sofa.", ["There is a dog", "on the sofa."]),  # not "There is | a dog"
        ("I think so, but the light is poor.", ["I think so,", "but the light is poor."]),
        ("Well then, it is a red mug.", ["Well then,", "it is a red mug."]),  # two words end at a clause mark
        ("Yes, it is a cat.", ["Yes, it is a cat."]),  # too short to split
        ("A red mug on a table.", ["A red mug", "on a table."]),
        ("The text on the sign reads Open 24 hours.", ["The text on the sign reads Open 24 hours."]),
        ("w76641 w39493 w39493 w39493 w39493 w61721", ["w76641 w39493 w39493 w39493 w39493 w61721"]),
    ],
)
def test_the_first_piece_may_be_a_phrase_where_a_speaker_would_pause(text, expected):
    assert pieces(text)[0] == expected


def test_a_phrase_is_released_once_the_word_after_it_is_complete_and_only_the_first_piece_is_one():
    assert pieces("You are holding a red mug.") == (["You are holding", "a red mug."], 5)  # " red" shows " a" ended
    assert pieces("You are holding a red mug.", first_phrase_words=0) == (["You are holding a red mug."], None)
    later = "It is a cat. It sits on the mat by the door with a ball."
    assert pieces(later)[0] == ["It is a cat.", "It sits on the mat by the door with a ball."]


def test_a_first_phrase_with_no_boundary_ends_after_twelve_words_not_at_the_long_cut():
    tokens = " ".join(f"w{k}" for k in range(40))  # random weights' words: no clause mark, no phrase start
    parts, at = pieces(tokens)
    assert parts[0] == " ".join(f"w{k}" for k in range(12)) and at == 14  # once the 13th word is complete
    assert parts[1:] == [" ".join(f"w{k}" for k in range(12, 40))]  # then sentences again (here: the flush)
    named = "One two three four five six seven eight nine ten eleven of twelve thirteen fourteen"
    assert pieces(named)[0][0] == "One two three four five six seven eight nine ten eleven"  # not "... eleven of"
    assert pieces("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12.")[0] == ["w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12."]
    assert pieces("one two of of of of of of of of of of of of of")[0][0] == "one two of"  # never under 3 words
    with pytest.raises(ValueError, match="first_phrase_max_words"):
        SentenceChunker(first_phrase_words=3, first_phrase_max_words=2)
    SentenceChunker(first_phrase_words=3, first_phrase_max_words=3)  # the least allowed
    SentenceChunker(max_chars=20)
    with pytest.raises(ValueError, match="max_chars"):
        SentenceChunker(max_chars=19)


def test_a_delta_that_ends_in_a_space_completes_its_last_word():
    assert SentenceChunker(first_phrase_words=3).feed("You are holding a ") == ["You are holding"]
    assert SentenceChunker(first_phrase_words=3).feed("You are holding a") == []  # "a" may become "apple"


def test_the_voice_bench_cuts_the_first_piece_where_the_chunker_releases_it():
    from fastvlm.bench.voice import first_piece_tokens

    assert first_piece_tokens(0) == 8  # "You are holding a red mug." once " It" shows the period ends it
    assert first_piece_tokens(3) == 5  # "You are holding" once " a" is complete


def test_a_long_run_without_a_full_stop_is_split_at_a_comma():
    text = "word " * 30 + ", and " + "more " * 40
    parts = list(split_sentences([text], max_chars=200))
    assert len(parts) > 1 and all(len(p) <= 200 for p in parts)
    assert parts[0].endswith(",")
    assert " ".join(parts).split() == text.split()
    early = "Well, " + "word " * 60  # its only comma is too early: a split there would leave a two-word piece
    parts = list(split_sentences([early], max_chars=200))
    assert len(parts[0]) > 200 * 2 // 3 and " ".join(parts).split() == early.split()


class FakeSpeaker:
    def __init__(self, engine, fail=None, tmp=None):
        self.engine, self.fail, self.tmp, self.calls = engine, fail, tmp, 0

    def synthesize(self, text):
        self.calls += 1
        if self.fail:
            raise SpeechUnavailable(self.fail)
        path = self.tmp / f"{self.engine}-{self.calls}.wav"
        path.write_bytes(b"RIFF")
        return Speech(path, self.engine, "v")


def test_fallback_uses_the_primary_when_it_works(tmp_path):
    s = FallbackSpeaker(FakeSpeaker("edge-tts", tmp=tmp_path), FakeSpeaker("espeak-ng", tmp=tmp_path))
    speech = s.synthesize("Hello.")
    assert speech.engine == "edge-tts" and speech.notice is None


def test_fallback_speaks_offline_and_says_why(tmp_path):
    now = [0.0]
    primary, offline = FakeSpeaker("edge-tts", fail="edge-tts failed (DNS)"), FakeSpeaker("espeak-ng", tmp=tmp_path)
    s = FallbackSpeaker(primary, offline, retry_primary_after_s=60, clock=lambda: now[0])
    speech = s.synthesize("Hello.")
    assert speech.engine == "espeak-ng" and "DNS" in speech.notice
    s.synthesize("Again.")  # within the minute: the network is not tried again
    assert primary.calls == 1 and offline.calls == 2
    now[0] = 61.0
    s.synthesize("Later.")
    assert primary.calls == 2


def test_a_primary_that_keeps_failing_is_tried_less_often_until_it_works_again(tmp_path):
    now = [0.0]
    primary = FakeSpeaker("edge-tts", fail="timed out after 5 s", tmp=tmp_path)
    offline = FakeSpeaker("espeak-ng", tmp=tmp_path)
    s = FallbackSpeaker(primary, offline, retry_primary_after_s=60, clock=lambda: now[0])  # at most 15 min
    tried = []
    for t in range(0, 3600, 5):  # a sentence every 5 s for an hour, the network dead
        now[0], calls = t, primary.calls
        s.synthesize("Hello.")
        tried += [t] if primary.calls > calls else []
    assert tried[:6] == [0, 60, 180, 420, 900, 1800] and tried[6:] == [2700]  # 60 s, 2, 4, 8, then 15 min
    primary.fail = None
    now[0] = 3600.0
    assert s.synthesize("Back.").engine == "edge-tts"
    primary.fail = "timed out after 5 s"
    now[0] = 3601.0
    s.synthesize("Down again.")
    now[0] = 3662.0
    s.synthesize("A minute later.")
    assert primary.calls == len(tried) + 3  # after a success, the first retry is a minute later again


def test_no_sound_at_all_says_both_reasons():
    edge, offline = FakeSpeaker("edge-tts", fail="edge-tts failed (DNS)"), FakeSpeaker("espeak-ng", fail="no eSpeak")
    s = FallbackSpeaker(edge, offline)
    with pytest.raises(SpeechUnavailable, match=r"No sound: edge-tts failed \(DNS\).*no eSpeak"):
        s.synthesize("Hello.")


@pytest.mark.parametrize("text", ["", "   \n"])
def test_nothing_to_say_is_an_input_error(text, tmp_path):
    with pytest.raises(InputError):
        FallbackSpeaker(FakeSpeaker("a", tmp=tmp_path), FakeSpeaker("b", tmp=tmp_path)).synthesize(text)


def fake_edge_tts(monkeypatch, save):
    class Communicate:
        def __init__(self, text, voice):
            self.text, self.voice = text, voice

        async def save(self, path):
            await save(self, path)

    monkeypatch.setitem(sys.modules, "edge_tts", types.SimpleNamespace(Communicate=Communicate))


def leftovers(folder):
    return list(folder.glob(f"{PREFIX}*"))


def test_edge_tts_writes_a_new_file_per_call(monkeypatch, tmp_path):
    async def save(c, path):
        with open(path, "wb") as f:
            f.write(f"{c.voice}:{c.text}".encode())

    fake_edge_tts(monkeypatch, save)
    speaker = EdgeSpeaker("en-US-ChristopherNeural", audio_dir=tmp_path / "audio")
    a, b = speaker.synthesize("One."), speaker.synthesize("One.")
    assert a.path != b.path and a.path.suffix == ".mp3" and a.path.name.startswith(PREFIX)
    assert a.path.read_bytes() == b"en-US-ChristopherNeural:One." and a.engine == "edge-tts"
    a.delete()
    assert not a.path.exists() and b.path.exists()


def test_edge_tts_empty_file_is_a_failure_and_is_removed(monkeypatch, tmp_path):
    async def save(c, path):
        open(path, "wb").close()

    fake_edge_tts(monkeypatch, save)
    with pytest.raises(SpeechUnavailable, match="no audio"):
        EdgeSpeaker(audio_dir=tmp_path).synthesize("Hi.")
    assert leftovers(tmp_path) == []


def test_edge_tts_that_hangs_times_out(monkeypatch, tmp_path):
    async def save(c, path):
        await asyncio.sleep(30)

    fake_edge_tts(monkeypatch, save)
    t0 = time.perf_counter()
    with pytest.raises(SpeechUnavailable, match="timed out after 0.2 s"):
        EdgeSpeaker(timeout_s=0.2, audio_dir=tmp_path).synthesize("Hi.")
    assert time.perf_counter() - t0 < 2 and leftovers(tmp_path) == []


def test_edge_tts_works_from_inside_a_running_event_loop(monkeypatch, tmp_path):
    async def save(c, path):
        with open(path, "wb") as f:
            f.write(b"mp3")

    fake_edge_tts(monkeypatch, save)

    async def handler():  # e.g. an async UI callback calling the sync API
        return EdgeSpeaker(audio_dir=tmp_path).synthesize("Hi.")

    assert asyncio.run(handler()).path.read_bytes() == b"mp3"


class FakeBackend:
    name = "fake"

    def __init__(self, data=b"RIFF" + bytes(100)):
        self.data, self.seen = data, []

    def write(self, text, voice, rate, path):
        self.seen.append((text, voice, rate))
        path.write_bytes(self.data)


def test_espeak_speaker_writes_wav_and_cleans_up_on_failure(tmp_path):
    backend = FakeBackend()
    speech = EspeakSpeaker(backend, "en-us", 160, tmp_path).synthesize("  Hello.  ")
    assert speech.path.suffix == ".wav" and speech.engine == "espeak-ng" and backend.seen == [("Hello.", "en-us", 160)]
    speech.delete()
    with pytest.raises(SpeechUnavailable, match="no audio"):
        EspeakSpeaker(FakeBackend(b"RIFF"), audio_dir=tmp_path).synthesize("Hello.")
    assert leftovers(tmp_path) == []


def test_old_audio_is_swept_and_nothing_else(tmp_path):
    old, new, other = tmp_path / f"{PREFIX}old.wav", tmp_path / f"{PREFIX}new.wav", tmp_path / "keep.wav"
    for p in (old, new, other):
        p.write_bytes(b"x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    os.utime(other, (time.time() - 7200, time.time() - 7200))
    assert remove_old_audio(tmp_path, older_than_s=3600) == 1
    assert not old.exists() and new.exists() and other.exists()


def test_without_the_wheel_the_debian_program_is_used(monkeypatch):
    from fastvlm.speech import espeak

    def no_wheel():
        raise espeak.EspeakError("no eSpeak NG library: pip install espeakng-loader")

    monkeypatch.setattr(espeak, "open_library", no_wheel)
    monkeypatch.setattr(espeak.shutil, "which", lambda name: "/usr/bin/espeak-ng")
    assert isinstance(espeak.find_backend(), espeak.EspeakProgram)
    monkeypatch.setattr(espeak.shutil, "which", lambda name: None)
    with pytest.raises(SpeechUnavailable, match="espeakng-loader.*no espeak-ng program"):
        EspeakSpeaker.load()


def test_the_program_reads_double_brackets_as_text_not_as_phoneme_codes(monkeypatch, tmp_path):
    from fastvlm.speech import espeak

    runs = []
    monkeypatch.setattr(espeak.subprocess, "run", lambda args, **kw: runs.append((args, kw["input"]))
                        or types.SimpleNamespace(returncode=0, stderr=b""))
    espeak.EspeakProgram("espeak-ng").write("Say [[h@l'oU]] or [[[x]]] now", "en-us", 175, tmp_path / "a.wav")
    (args, stdin), = runs
    assert "--stdin" in args and stdin.decode() == "Say [ [h@l'oU] ] or [ [ [x] ] ] now"
