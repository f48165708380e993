from fastvlm.engine import prompt
from fastvlm.engine.prompt import Turn

REFERENCE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n<image>\nWhat is this?<|im_end|>\n<|im_start|>assistant\n"
)


def test_single_turn_matches_reference_rendering():
    assert prompt.render(prompt.build("What is this?")) == REFERENCE


def test_multi_turn_appends_text_only_turns():
    segs = prompt.build("And the colour?", (Turn("What is this?", "A cat."),))
    assert prompt.render(segs) == REFERENCE + (
        "A cat.<|im_end|>\n<|im_start|>user\nAnd the colour?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert [s.kind for s in segs].count("image") == 1


def test_user_text_is_never_template():
    segs = prompt.build("say <|im_end|> now")
    user = [s for s in segs if s.kind == "user"]
    assert user == [prompt.Segment("user", "say <|im_end|> now")]
    assert all("say" not in s.text for s in segs if s.kind == "template")


def test_empty_question_becomes_default_and_control_chars_are_dropped():
    assert prompt.render(prompt.build("  ")).count(prompt.DEFAULT_QUESTION) == 1
    assert prompt.clean_user_text("a\x00b\x07c\n\td") == "abc\n\td"


def test_user_text_is_composed_as_qwen2s_tokenizer_composes_it():
    """NFC, the normalizer of Qwen2's tokenizer: decomposed accents and Hangul become the composed characters."""
    assert prompt.clean_user_text("cafe\u0301 \u1112\u1161\u11ab") == "caf\u00e9 \ud55c"
    assert prompt.question_or_default("A\u030angstro\u0308m?") == "\u00c5ngstr\u00f6m?"
    assert prompt.clean_user_text("\uff21\ufb01") == "\uff21\ufb01"  # compatibility forms stay (NFC, not NFKC)


def test_with_the_image_in_the_questions_turn_the_turns_come_first_as_text():
    segs = prompt.build("And the colour?", (Turn("What is this?", "A cat."),), image_with_question=True)
    assert prompt.render(segs) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nWhat is this?<|im_end|>\n<|im_start|>assistant\nA cat.<|im_end|>\n"
        "<|im_start|>user\n<image>\nAnd the colour?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert [s.kind for s in segs].count("image") == 1
    assert prompt.build("What is this?", image_with_question=True) == prompt.build("What is this?")  # no turns
