"""`Engine.prepare(image, history=...)`: a conversation's earlier turns prefilled with the image while the next
question is spoken (the voice tab), laid out as the question's prompt will have them (scripted models)."""

from fastvlm import Request
from fastvlm.engine import plan as planner
from fastvlm.engine.kv import Image, common_prefix, identities
from fastvlm.engine.prompt import Turn
from tests.unit.engine.test_engine import IMG, make
from tests.unit.engine.test_words_ahead import char_tokenize

HISTORY = (Turn("What am I holding?", "A red cup."), Turn("Is it full?", "Yes, to the brim."))


def test_the_turns_prepared_are_the_start_of_the_next_questions_prompt():
    image = Image("k", [[0.0]] * 4)
    question = identities(planner.plan("What is written on it?", HISTORY, image, char_tokenize, 4096).parts)
    for words in ("", "What is"):
        ahead = identities(planner.prefix_parts(image, char_tokenize, words, HISTORY, 4096))
        assert question[: len(ahead)] == ahead
        text = "".join(chr(t) for t in ahead if isinstance(t, int))
        assert text.endswith("Yes, to the brim.<|im_end|>\n<|im_start|>user\n" + words)


def test_only_the_newest_turns_that_leave_room_for_a_question_are_prepared():
    image = Image("k", [[0.0]] * 4)
    alone = len(identities(planner.prefix_parts(image, char_tokenize, "", HISTORY[1:], 4096)))
    budget = alone + 80  # room for the newest turn and a question, not for the older turn too
    prepared = identities(planner.prefix_parts(image, char_tokenize, "", HISTORY, budget))
    assert len(prepared) == alone
    asked = planner.plan("Why?", HISTORY, image, char_tokenize, budget)  # the question keeps the same turns
    assert identities(asked.parts)[:alone] == prepared and "1 oldest turn(s) were left out" in asked.notices[0]


def test_prepare_with_history_prefills_the_turns_and_the_answer_starts_from_them():
    engine, lm = make()
    assert engine.prepare(IMG, history=HISTORY)
    prepared = lm.prefills[-1]
    assert "Yes, to the brim." in "".join(chr(t) for t in prepared if isinstance(t, int) and t < 256)
    engine.answer(Request(IMG, "What is written on it?", HISTORY))
    assert lm.prefills[-1][: len(prepared)] == prepared


def test_a_prepare_of_the_same_frame_with_other_turns_is_a_new_one():
    engine, lm = make()
    assert engine.prepare(IMG, history=HISTORY)
    assert engine.prepare(IMG, history=HISTORY[1:])  # another question's turns: prefilled anew
    assert engine.vision.calls == 1  # the frame was encoded once
    assert "A red cup." not in "".join(chr(t) for t in lm.prefills[-1] if isinstance(t, int) and t < 256)


def test_with_the_image_in_the_questions_turn_every_frame_shares_the_turns_before_it():
    """`image_with_question` (the voice tab): the turns come before the frame, so a new frame with the same turns
    finds them in the KV cache (only the frame and the question are prefilled), and what `prepare` puts there is
    the start of the question's prompt."""
    a, b = Image("a", [[0.0]] * 4), Image("b", [[0.0]] * 4)
    earlier = identities(planner.plan("Is it full?", HISTORY, a, char_tokenize, 4096, image_with_question=True).parts)
    asked = identities(planner.plan("What is written on it?", HISTORY, b, char_tokenize, 4096,
                                    image_with_question=True).parts)
    shared = common_prefix(earlier, asked)
    assert "".join(chr(t) for t in asked[:shared]).endswith("Yes, to the brim.<|im_end|>\n<|im_start|>user\n")
    assert asked[shared] == ("b", 0)  # the frame comes right after the turns
    for words in ("", "What is"):
        ahead = identities(planner.prefix_parts(b, char_tokenize, words, HISTORY, 4096, image_with_question=True))
        assert asked[: len(ahead)] == ahead and ahead[shared] == ("b", 0)
    first = identities(planner.plan("What is written on it?", HISTORY, b, char_tokenize, 4096).parts)
    assert common_prefix(earlier, first) < shared  # the image in the first turn: the frames part ways before it


def test_a_prepare_with_the_image_in_the_questions_turn_is_the_start_of_that_request():
    engine, lm = make()
    assert engine.prepare(IMG, history=HISTORY)
    assert engine.prepare(IMG, history=HISTORY, image_with_question=True)  # another layout: prefilled anew
    prepared = lm.prefills[-1]
    text = "".join(chr(t) for t in prepared if isinstance(t, int) and t < 256)
    assert text.endswith("Yes, to the brim.\nuser\n\n") and isinstance(prepared[-2], tuple)  # turns, then frame
    engine.answer(Request(IMG, "What is written on it?", HISTORY, image_with_question=True))
    assert lm.prefills[-1][: len(prepared)] == prepared


def test_without_a_frame_only_the_turns_before_it_are_prepared_and_the_frame_then_prefills_alone():
    """The voice tab while an answer is spoken: the next question's turns, before a frame not known yet."""
    engine, lm = make()
    assert engine.prepare(None, history=HISTORY, image_with_question=True)
    turns = lm.prefills[-1]
    assert engine.vision.calls == 0 and not any(isinstance(t, tuple) for t in turns)  # nothing encoded, no image
    assert "".join(chr(t) for t in turns if isinstance(t, int) and t < 256).endswith("Yes, to the brim.\nuser\n")
    assert engine.prepare(IMG, history=HISTORY, image_with_question=True)
    frame = lm.prefills[-1]
    assert frame[: len(turns)] == turns and isinstance(frame[len(turns)], tuple)  # the frame right after them
    engine.answer(Request(IMG, "What is written on it?", HISTORY, image_with_question=True))
    assert lm.prefills[-1][: len(frame)] == frame


def test_without_a_frame_nothing_is_prepared_but_turns_before_one():
    engine, lm = make()
    assert engine.prepare(None, history=HISTORY) is False  # the image first: nothing comes before it but the system
    assert engine.prepare(None, image_with_question=True) is False  # no turns
    assert lm.prefills == [] and engine.vision.calls == 0
