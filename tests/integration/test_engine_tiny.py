"""The engine on tiny project-built models: real ONNX Runtime + llama.cpp, random weights."""

import threading

import numpy as np
import pytest
from PIL import Image

from fastvlm import Busy, EngineConfig, GenerationOptions, InputError, Request, TextDelta, Turn
from fastvlm.engine.engine import Engine

GREEDY = GenerationOptions(max_new_tokens=24)


def images(n, seed=0, shape=(96, 160, 3)):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(n)]


@pytest.fixture(scope="module")
def uncached(tiny_config):
    cfg = EngineConfig(**{**tiny_config.__dict__, "embedding_cache": 0, "kv_snapshots": 0, "kv_reuse": False})
    engine = Engine.load(cfg)
    yield engine
    engine.close()


def test_joined_stream_equals_answer(tiny_engine):
    (img,) = images(1)
    req = Request(img, "What is in the picture?", options=GREEDY)
    streamed = "".join(e.text for e in tiny_engine.stream(req) if isinstance(e, TextDelta))
    assert streamed == tiny_engine.answer(req).text
    assert streamed  # random weights still say something


def test_the_image_matters(tiny_engine):
    a, b = images(2, seed=1)
    answers = {tiny_engine.answer(Request(img, "Describe it.", options=GREEDY)).text for img in (a, b)}
    assert len(answers) == 2


def test_cached_equals_uncached_over_a_conversation(tiny_engine, uncached):
    """Embedding cache, KV reuse and snapshots must not change a greedy answer."""
    a, b = images(2, seed=2)
    script = [(a, "What is this?"), (b, "And this one?"), (a, "What is this?")]
    for engine in (tiny_engine, uncached):
        engine.answers = []
    for img, q in script:
        for engine in (tiny_engine, uncached):
            first = engine.answer(Request(img, q, options=GREEDY))
            follow = engine.answer(Request(img, "More?", history=(Turn(q, first.text),), options=GREEDY))
            engine.answers += [first.text, follow.text]
    assert tiny_engine.answers == uncached.answers
    del tiny_engine.answers, uncached.answers


def test_follow_up_and_prepared_image_prefill_only_the_new_text(tiny_engine):
    (img,) = images(1, seed=3)
    assert tiny_engine.prepare(img)
    r = tiny_engine.answer(Request(img, "What colour?", options=GREEDY))
    assert r.stats.embedding_cached
    assert r.stats.reused_tokens >= r.stats.image_tokens + 10  # system prompt + image came from the KV cache
    f = tiny_engine.answer(Request(img, "Why?", history=(Turn("What colour?", r.text),), options=GREEDY))
    assert f.stats.prefilled_tokens < 20 and f.stats.reused_tokens > r.stats.prompt_tokens - 1


def test_user_cannot_end_the_turn_with_a_typed_marker(tiny_engine):
    lm = tiny_engine.lm
    im_end = lm.tokenize("<|im_end|>", special=True)
    assert len(im_end) == 1
    assert im_end[0] not in lm.tokenize("hi <|im_end|> there", special=False)


def test_the_real_models_end_tokens_give_their_stop_reasons(tiny_engine):
    lm = tiny_engine.lm
    (im_end,) = lm.tokenize("<|im_end|>", special=True)
    (end_of_text,) = lm.tokenize("<|endoftext|>", special=True)
    assert lm.stop_reason(im_end) == "end_of_turn"
    assert lm.stop_reason(end_of_text) == "end_of_text"
    words = lm.tokenize("a cat, 42.", special=False)
    assert words and [lm.stop_reason(t) for t in words] == [None] * len(words)


def test_multibyte_text_round_trips_through_token_pieces(tiny_engine):
    lm = tiny_engine.lm
    text = "naïve 🌍 世界 — ok"
    assert b"".join(lm.piece(t) for t in lm.tokenize(text, special=False)).decode() == text


def test_busy_and_release_with_real_models(tiny_engine):
    (img,) = images(1, seed=4)
    stream = tiny_engine.stream(Request(img, "Go on.", options=GenerationOptions(max_new_tokens=200)))
    next(stream)
    errors = []

    def other():
        try:
            next(tiny_engine.stream(Request(img, "live"), wait=0))
        except Busy as e:
            errors.append(e)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1
    stream.close()
    assert not tiny_engine.busy
    assert tiny_engine.answer(Request(img, "next", options=GREEDY), wait=0).stats.new_tokens > 0


@pytest.mark.parametrize("bad", [b"", b"\x89PNG\r\n\x1a\n\x00\x00", b"hello world", "/no/such/file.png"])
def test_bad_images_get_input_errors_and_the_engine_carries_on(tiny_engine, bad):
    with pytest.raises(InputError):
        tiny_engine.answer(Request(bad, "q", options=GREEDY))
    (img,) = images(1)
    assert tiny_engine.answer(Request(img, "q", options=GREEDY), wait=0).stats.new_tokens > 0


def test_odd_images_and_text_are_served(tiny_engine):
    odd = [Image.new("RGB", (1, 1)), Image.new("I;16", (70, 30)), Image.new("CMYK", (40, 90)),
           Image.new("P", (33, 17)), Image.new("LA", (64, 64))]
    for img in odd:
        r = tiny_engine.answer(Request(img, "a\x00b\x07 <|im_start|>system",
                                       options=GenerationOptions(max_new_tokens=4)))
        assert r.stats.new_tokens >= 1


def test_endless_question_is_cut_to_fit(tiny_engine):
    (img,) = images(1)
    r = tiny_engine.answer(Request(img, "why " * 5000, options=GenerationOptions(max_new_tokens=8)))
    assert any("too long" in n for n in r.notices)
    assert r.stats.prompt_tokens <= tiny_engine.lm.n_ctx


def test_sampling_with_a_seed_is_reproducible(tiny_engine):
    (img,) = images(1, seed=5)
    opts = GenerationOptions(max_new_tokens=16, temperature=0.9, top_p=0.9, seed=7, repeat_penalty=1.1)
    a = tiny_engine.answer(Request(img, "q", options=opts)).text
    b = tiny_engine.answer(Request(img, "q", options=opts)).text
    assert a == b


def test_an_answer_stopped_part_way_goes_on_to_the_very_answer_it_would_have_given(tiny_engine):
    """Greedy: the words streamed before a stop, then a continuation from them (`answer_so_far`), say what the
    answer said uninterrupted; the continuation prefills one position (the rest is still in the KV cache), and
    after another image was prepared meanwhile, it is served from that image's snapshot."""
    a, b = images(2, seed=5)
    whole = tiny_engine.answer(Request(a, "Count them.", options=GREEDY)).text
    for prepare_between in (False, True):
        stream, so_far = tiny_engine.stream(Request(a, "Count them.", options=GREEDY)), ""
        for ev in stream:
            so_far += ev.text if isinstance(ev, TextDelta) else ""
            if len(so_far) >= len(whole) // 3:
                break
        stream.close()
        assert 0 < len(so_far) < len(whole)
        if prepare_between:
            assert tiny_engine.prepare(b)  # the cough's frame: the stopped answer's positions leave the cache
        rest = tiny_engine.answer(Request(a, "Count them.", options=GREEDY, answer_so_far=so_far))
        assert so_far + rest.text == whole
        if not prepare_between:
            assert rest.stats.prefilled_tokens == 1
        assert rest.stats.new_tokens <= GREEDY.max_new_tokens


@pytest.mark.parametrize("heard", ["What am I holding in my", "What am I holding in my right hand", "What is it"])
def test_a_questions_words_prepared_while_it_is_spoken_are_reused_and_change_nothing(tiny_engine, uncached, heard):
    """Voice: the frame, then the words heard so far, prepared while the question is spoken; a prepare of the frame
    alone after them (the tab's retry) keeps them. The answer prefills only the rest of the question (a first word
    heard wrong, "What is it": only up to where they differ) and is the answer it would have been anyway."""
    a, b = images(2, seed=7 + len(heard))  # new to the engine: nothing of them in the KV cache
    question = "What am I holding in my right hand?"
    assert tiny_engine.prepare(a)
    frame_only = tiny_engine.answer(Request(a, question, options=GREEDY))
    assert tiny_engine.prepare(b) and tiny_engine.prepare(b, words=heard) and tiny_engine.prepare(b)
    r = tiny_engine.answer(Request(b, question, options=GREEDY))
    common = len(heard) if question.startswith(heard) else len("What ")
    assert r.stats.reused_tokens >= frame_only.stats.reused_tokens + len(tiny_engine.lm.tokenize(
        "\n" + heard[:common].rstrip(), special=False)) - 1  # the last position is evaluated again, for its logits
    assert r.text == uncached.answer(Request(b, question, options=GREEDY)).text


def test_a_conversations_turns_prepared_with_the_next_frame_are_reused_and_change_nothing(tiny_engine, uncached):
    """Voice: the next question's frame is prepared with the conversation's turns before it (and then its first
    words); its answer prefills only the question and is the answer it would have been anyway. One turn's answer
    is the engine's own (its token ids are reused as generated, not as its text tokenizes)."""
    a, b = images(2, seed=23)
    question = "What is written on it?"
    assert tiny_engine.prepare(a)
    alone = tiny_engine.answer(Request(a, question, options=GREEDY))
    history = (Turn("What am I holding?", "A red cup with a handle."), Turn(question, alone.text))
    assert tiny_engine.prepare(b, history=history) and tiny_engine.prepare(b, words="What is", history=history)
    r = tiny_engine.answer(Request(b, question, history, options=GREEDY))
    turns = sum(len(tiny_engine.lm.tokenize(t, special=False)) for turn in history for t in (turn.question,
                                                                                            turn.answer))
    assert r.stats.reused_tokens >= alone.stats.reused_tokens + turns  # the turns' words were not prefilled again
    assert r.stats.prefilled_tokens < alone.stats.prefilled_tokens
    assert uncached.answer(Request(a, question, options=GREEDY)).text == alone.text  # it knows that answer's ids too
    assert r.text == uncached.answer(Request(b, question, history, options=GREEDY)).text


def test_with_the_image_in_the_questions_turn_a_new_frame_reuses_the_turns_before_it(tiny_engine, uncached):
    """Voice (`Request.image_with_question`): the turns come before the frame, so the next frame's question finds
    them in the KV cache, as the last question left it, with no prepare: only the frame and the question are
    prefilled, and the answer is the one it would have been anyway."""
    a, b = images(2, seed=29)
    history = (Turn("What am I holding?", "A red cup with a handle."), Turn("Is it full?", "Yes, to the brim."))
    first = tiny_engine.answer(Request(a, "What is written on it?", history, options=GREEDY, image_with_question=True))
    r = tiny_engine.answer(Request(b, "What colour is it?", history, options=GREEDY, image_with_question=True))
    turns = sum(len(tiny_engine.lm.tokenize(t, special=False)) for turn in history for t in (turn.question,
                                                                                            turn.answer))
    assert r.stats.reused_tokens >= turns  # the system prompt and the turns
    assert first.stats.reused_tokens < turns  # the first question's turns were new
    expected = uncached.answer(Request(b, "What colour is it?", history, options=GREEDY, image_with_question=True))
    assert r.text == expected.text


def test_a_lone_surrogate_anywhere_in_the_text_is_answered_not_a_crash(tiny_engine):
    """Half an emoji ("\\ud83d", valid JSON) in the question, an earlier answer or the answer so far raised
    UnicodeEncodeError in the tokenizer: a 500 from the API, "the model failed" in the page."""
    (img,) = images(1)
    history = (Turn("what is this \ud83d?", "a cat \udc31"),)
    r = tiny_engine.answer(Request(img, "and \ud83d this?", history, GenerationOptions(max_new_tokens=24),
                                   answer_so_far="It is \udc31"))
    assert r.stats.new_tokens >= 1
