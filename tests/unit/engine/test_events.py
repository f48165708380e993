"""The stream's events: decode speed as the UI and the API report it, `collect()` (what `answer()` returns) and
`all_but_done()` (how the engine hands out a stream's events before its `Done`)."""

import pytest

from fastvlm.engine.events import Done, FirstToken, Notice, Stats, TextDelta, all_but_done, collect


@pytest.mark.parametrize("new_tokens, decode_s, speed", [
    (11, 2.0, 5.0),  # the first token is TTFT's: ten tokens in two seconds
    (2, 0.25, 4.0),
    (1, 0.5, 0.0),  # one token: no decode to speak of
    (0, 0.0, 0.0),
    (5, 0.0, 0.0),  # no decode time measured (a cancelled answer)
])  # fmt: skip
def test_decode_speed_counts_the_tokens_after_the_first(new_tokens, decode_s, speed):
    assert Stats(new_tokens=new_tokens, decode_s=decode_s).tokens_per_s == pytest.approx(speed)


def test_prefilled_tokens_are_the_prompts_positions_less_those_reused():
    assert Stats(prompt_tokens=94, reused_tokens=30).prefilled_tokens == 64


def stream():
    yield FirstToken(0.1)
    yield TextDelta("A red")
    yield Notice("answer cut at max_tokens")
    yield TextDelta(" mug.")
    yield Done(Stats(new_tokens=3))


def test_collect_joins_the_text_keeps_the_notices_and_takes_the_stats_of_done():
    result = collect(stream())
    assert result.text == "A red mug." and result.notices == ("answer cut at max_tokens",)
    assert result.stats == Stats(new_tokens=3)
    assert collect(iter([TextDelta("cut")])).stats == Stats()  # no Done: empty stats, not an error


def test_all_but_done_hands_out_every_other_event_and_returns_the_done():
    events = all_but_done(stream())
    seen = []
    with pytest.raises(StopIteration) as stop:
        while True:
            seen.append(next(events))
    assert [type(e) for e in seen] == [FirstToken, TextDelta, Notice, TextDelta]
    assert stop.value.value == Done(Stats(new_tokens=3))


def test_all_but_done_closed_early_closes_its_source_first():
    closed = []

    def source():
        try:
            yield TextDelta("A")
            yield TextDelta(" red")
        finally:
            closed.append(True)  # the engine's clean-up, while it is still held

    held = source()  # still referenced: only an explicit close() runs its clean-up now
    events = all_but_done(held)
    assert next(events) == TextDelta("A")
    events.close()
    assert closed == [True]
