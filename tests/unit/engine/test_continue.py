"""An answer stopped part way goes on from its own words (`Request.answer_so_far`), as the voice tab does when
speech over an answer turns out to be no question."""

import numpy as np
import pytest

from fastvlm import EngineConfig, GenerationOptions, Request, TextDelta, Turn
from fastvlm.engine import plan as planner
from fastvlm.engine.decode import AnswerIds
from fastvlm.engine.engine import Engine
from fastvlm.engine.kv import Image, Tokens
from fastvlm.engine.textstream import AnswerText
from tests.fakes import SPECIAL, FakeLM, FakeVision
from tests.unit.engine.test_engine import IMG, make


def test_the_words_so_far_follow_the_assistant_header_as_plain_text():
    lm = FakeLM()
    image = Image(("img",), np.zeros((4, 8), np.float32))
    plain = planner.plan("q", (), image, lm.tokenize, 4096)
    said = lm.tokenize("It is <|im_end|>", special=False)
    going_on = planner.plan("q", (), image, lm.tokenize, 4096, answer_so_far=said)
    assert going_on.positions == plain.positions + len(said)
    tail = going_on.parts[-1]
    assert isinstance(tail, Tokens)
    assert tail.ids == plain.parts[-1].ids + tuple(said)  # a typed marker in it stays text
    assert 1001 not in said


def test_a_question_is_cut_before_the_words_so_far_are():
    lm = FakeLM()
    image = Image(("img",), np.zeros((4, 8), np.float32))
    plain = planner.plan("what is this", (), image, lm.tokenize, 4096)
    p = planner.plan("what is this", (), image, lm.tokenize, plain.positions + 3, answer_so_far=list(b"abcdef"))
    assert p.positions == plain.positions + 3
    assert p.parts[-1].ids[-6:] == tuple(b"abcdef")
    assert any("too long" in n for n in p.notices)


def test_a_continued_stream_yields_only_what_follows_and_prefills_the_words_so_far():
    engine, lm = make(b"rest.")
    events = list(engine.stream(Request(IMG, "q", answer_so_far="So far, ")))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "rest."
    assert lm.prefills[-1][-len(b"So far, "):] == list(b"So far, ")
    assert events[-1].stats.stop_reason == "end_of_turn"


class _CountingLM(FakeLM):
    """FakeLM that records the texts it was asked to tokenize: a prompt quoting an answer shows whether the
    answer's generated ids were used or its text tokenized again."""

    def __init__(self, script: bytes) -> None:
        super().__init__(script)
        self.tokenized: list[str] = []

    def tokenize(self, text, *, special):
        self.tokenized.append(text)
        return super().tokenize(text, special=special)


def stopped_after(chars: int):
    """An engine whose answer "abcdefgh" was read `chars` characters far, then its stream closed (what the voice
    tab's read-ahead does when speech comes over the answer); its LM notes what it tokenizes from then on."""
    lm = _CountingLM(b"abcdefgh")
    engine, _ = make()
    engine.lm = lm
    stream, text = engine.stream(Request(IMG, "q")), ""
    for ev in stream:
        text += ev.text if isinstance(ev, TextDelta) else ""
        if len(text) == chars:
            break
    stream.close()
    lm.tokenized.clear()
    return engine, lm


def test_the_ids_of_an_answer_stopped_part_way_are_kept_for_its_continuation():
    engine, lm = stopped_after(3)
    list(engine.stream(Request(IMG, "q", answer_so_far="abc")))
    assert "abc" not in lm.tokenized  # its own ids were used, not a new tokenization of its text


@pytest.mark.parametrize("piece_bytes, stops, whole", [
    ([b"ab", b"c"], (), True),
    ([b"a", "é".encode()[:1]], (), False),  # half a character: the ids say more than the text
    ([b"ab", b"<"], ("<stop>",), False),  # held back: could start the stop string
])
def test_answer_text_spells_its_ids_only_when_nothing_is_held_back(piece_bytes, stops, whole):
    answer = AnswerText(lambda t: piece_bytes[t], stops, before=("Yes, ", (7, 8)))
    for token in range(len(piece_bytes)):
        answer.feed(token)
    spelled = answer.spelled()
    if whole:
        assert spelled == ("Yes, abc", (7, 8, 0, 1), (-1, 5, 7, 8))
    else:
        assert spelled is None


def test_a_stop_string_hit_spells_nothing():
    answer = AnswerText(lambda t: b"x<stop>" if t else b"a", ("<stop>",))
    answer.feed(0)
    assert answer.feed(1) == ("x", True)
    assert answer.spelled() is None


def test_a_finished_answer_quoted_as_history_uses_its_own_ids():
    lm = _CountingLM(b"Done.")
    engine, _ = make()
    engine.lm = lm
    assert engine.answer(Request(IMG, "q", options=GenerationOptions())).text == "Done."
    lm.tokenized.clear()
    engine.answer(Request(IMG, "more?", history=(Turn("q", "Done."),)))
    assert "Done." not in lm.tokenized


def test_the_words_so_far_count_against_the_answers_length():
    engine, lm = make(b"abcdef")
    going_on = engine.answer(Request(IMG, "q", options=GenerationOptions(max_new_tokens=4), answer_so_far="xy"))
    assert (going_on.text, going_on.stats.stop_reason, going_on.stats.new_tokens) == ("ab", "max_tokens", 2)
    prefills = len(lm.prefills)
    spent = engine.answer(Request(IMG, "q", options=GenerationOptions(max_new_tokens=4), answer_so_far="wxyz"))
    assert (spent.text, spent.stats.stop_reason, spent.stats.new_tokens) == ("", "max_tokens", 0)
    assert len(lm.prefills) == prefills + 1  # the prompt is still checked and prefilled (it must fit)


def test_the_start_of_a_kept_answer_is_found_at_a_tokens_end_and_only_when_asked_for():
    answers = AnswerIds()
    answers.put("It is a cat", (1, 2, 3, 4), (2, 5, 7, 11))  # "It" " is" " a" " cat"
    assert answers.ids("It is a cat") == [1, 2, 3, 4]
    assert answers.ids("It is", start=True) == [1, 2] and answers.ids("It is") is None  # a question: its own
    assert answers.ids("It i", start=True) is None  # inside a token: tokenized anew
    assert answers.ids("Is it", start=True) is None and answers.ids("", start=True) is None


def test_a_stream_read_only_in_part_goes_on_from_the_ids_the_server_made():
    """A remote client stops reading after "abc"; the server made "abcde" before it saw the client go."""
    engine, lm = stopped_after(5)
    list(engine.stream(Request(IMG, "q", answer_so_far="abc")))
    assert "abc" not in lm.tokenized


def kept(pieces: dict[int, bytes], stops: tuple[str, ...] = ()) -> tuple[str, AnswerIds]:
    """An answer made of `pieces`' tokens, in order, kept as the engine keeps it."""
    text, answers = AnswerText(pieces.__getitem__, stops), AnswerIds()
    for token in pieces:
        text.feed(token)
    text.flush()
    spelled = text.spelled()
    if spelled is not None:
        answers.put(*spelled)
    return "".join(text.pieces), answers


def test_an_answers_start_is_only_where_its_ids_spell_exactly_the_text_streamed():
    """A token may end inside a character (its last bytes come with the next) or with text held back as the
    start of a stop string: the ids up to it spell more than was streamed, so a continuation from that text
    must not be prefilled with them (it would go on from bytes the client never had)."""
    whole, answers = kept({1: b"a", 2: "b\u4f60".encode()[:3], 3: "\u4f60".encode()[2:] + b"c"})
    assert whole == "ab\u4f60c" and answers.ids(whole, start=True) == [1, 2, 3]
    assert answers.ids("ab", start=True) is None and answers.ids("a", start=True) == [1]  # was [1, 2]: "ab" + 2 bytes
    whole, answers = kept({1: b"a", 2: b".\n", 3: b"x"}, stops=("\n\n",))
    assert whole == "a.\nx" and answers.ids("a.", start=True) is None  # was [1, 2]: "a." and a held-back "\n"


class ScriptedLM(FakeLM):
    """Says `tokens` (any ids, control ones too), then <|im_end|>."""

    def __init__(self, tokens: list[int]):
        super().__init__(b"")
        self.tokens = tokens

    def generate(self, options, seed=0):
        yield from [*self.tokens, self.end]


def test_an_answer_with_a_control_token_in_it_is_never_reused_for_text():
    """A control token has no text (`piece` gives b""): the answer "h<|im_start|>i" reads "hi", and someone who
    then asks "hi" must get plain text tokens, never that control token in their question."""
    lm = ScriptedLM([ord("h"), SPECIAL["<|im_start|>"], ord("i")])
    engine = Engine(FakeVision(), lm, EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1))
    assert engine.answer(Request(IMG, "q")).text == "hi"
    im_start = SPECIAL["<|im_start|>"]
    template = lm.prefills[-1].count(im_start)
    engine.answer(Request(IMG, "hi"))
    assert lm.prefills[-1].count(im_start) == template  # was one more: the question fed as h <|im_start|> i
