"""`Engine.prepare(image, words=...)`: a question's first words, heard while it is spoken, prefilled after its
image (scripted models; the KV reuse on a real llama.cpp is tests/integration/test_engine_tiny.py)."""

import threading

from fastvlm import Request
from fastvlm.engine import plan as planner
from fastvlm.engine.kv import Image, identities
from tests.fakes import FakeLM
from tests.unit.engine.test_engine import IMG, make, preparing, slow_prefix_engine


def char_tokenize(text, *, special):
    return [ord(c) for c in text]


def test_the_words_prepared_are_the_start_of_the_questions_prompt():
    image = Image("k", [[0.0]] * 4)
    question = planner.plan("What am I holding in my hand?", (), image, char_tokenize, 4096)
    ahead = planner.prefix_parts(image, char_tokenize, "  What am I holding ")  # as Whisper may pad it
    wanted, prepared = identities(question.parts), identities(ahead)
    assert wanted[: len(prepared)] == prepared
    assert len(prepared) == len(identities(planner.prefix_parts(image, char_tokenize))) + len("\nWhat am I holding")


def test_the_words_prepared_are_bounded():
    image = Image("k", [[0.0]] * 4)
    head = len(identities(planner.prefix_parts(image, char_tokenize)))
    long = planner.prefix_parts(image, char_tokenize, "word " * 1000)
    assert len(identities(long)) == head + len("\n") + planner.WORDS_AHEAD_TOKENS  # the opener, then the words


def test_prepare_with_words_prefills_them_after_the_image():
    engine, lm = make()
    assert engine.prepare(IMG) and engine.prepare(IMG, words="What is")
    frame_only, with_words = lm.prefills[-2], lm.prefills[-1]
    assert with_words[: len(frame_only)] == frame_only
    assert with_words[len(frame_only):] == [ord(c) for c in "\nWhat is"]
    assert engine.vision.calls == 1  # the image was encoded once


def test_words_take_over_from_a_prepare_of_the_same_frame_and_a_plain_one_leaves_them_be():
    """The question's words come while its frame is still prefilled: they take over (the positions prefilled so
    far stay in the cache); a prepare of the frame alone then (the voice tab's retry at `SpeechStarted`) is
    already covered."""
    engine, lm = slow_prefix_engine()
    worker, first = preparing(engine, lm, IMG)
    assert engine.prepare(IMG, words="What color") is True
    worker.join()
    assert first["ok"] is False
    assert lm.prefills[-1][-len("What color"):] == [ord(c) for c in "What color"]

    worker, _ = preparing_words(engine, lm, "What color is")
    assert engine.prepare(IMG) is False  # the frame is under way with the words
    assert engine.prepare(IMG, words="What color is") is False  # so are these words
    worker.join()


def test_an_answer_for_the_frame_waits_for_its_words_to_be_prefilled():
    engine, lm = slow_prefix_engine()
    worker, out = preparing_words(engine, lm, "What")
    result = engine.answer(Request(IMG, "What is it?"))
    worker.join()
    assert out["ok"] is True and result.text


def preparing_words(engine, lm: FakeLM, words: str):
    out: dict = {}
    lm.prefilling.clear()
    worker = threading.Thread(target=lambda: out.update(ok=engine.prepare(IMG, words=words)))
    worker.start()
    assert lm.prefilling.wait(5)
    return worker, out


def test_words_never_take_over_from_the_prepare_of_another_image():
    """Two people speak at once: one's words must not keep stopping the other's frame (each question needs its
    frame; words only save a few positions)."""
    engine, lm = slow_prefix_engine()
    other = 255 - IMG
    worker, prepared = preparing(engine, lm, other)
    assert engine.prepare(IMG, words="What is") is False
    worker.join()
    assert prepared["ok"] is True
