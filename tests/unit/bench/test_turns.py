"""The turn bench's own counting (`fastvlm.bench.turns`): what it calls a cut, and how it plays the microphone.

The journeys' "paused questions cut" and "end of speech → first sound" rest on these; a scripted turn taker
ends each turn where a test says, so the counts can be checked without a VAD or Whisper."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm.bench import turns
from fastvlm.speech.turn import TurnEnded

RATE = turns.RATE
CHUNK_S = 0.05


class EndsAt:
    """A turn taker that ends the turn (its pause beginning at `end_s`) once `at_s` of audio has been fed, and
    records the waits it was given for a verdict."""

    def __init__(self, end_s: float | None, at_s: float = 0.0):
        self.end_s, self.at_s, self.fed, self.waits = end_s, at_s, 0, []

    def feed(self, rate: int, chunk: np.ndarray) -> list:
        self.fed += chunk.size
        if self.end_s is not None and self.fed >= self.at_s * rate:
            return [TurnEnded(np.zeros(1, np.float32), 0.0, self.end_s)]
        return []

    def settle(self, wait_s: float) -> list:
        self.waits.append(wait_s)
        return []


def paused(duration_s: float = 0.4) -> turns.Spoken:
    """A question whose pause runs from 0.10 s to 0.15 s and whose speech ends at 0.25 s."""
    return turns.Spoken(np.zeros(int(duration_s * RATE), np.float32), "What is written on the sign?", 0.05, 0.25,
                        (0.10, 0.15))


@pytest.mark.parametrize("end_s, cut", [(0.10, True), (0.149, True), (0.15, False), (0.25, False)])
def test_a_turn_that_ends_in_the_pause_is_cut_and_one_that_ends_after_it_is_not(end_s, cut):
    res = turns.cut_off(lambda rule: EndsAt(end_s, at_s=0.2), ("semantic",), [paused()], CHUNK_S)["semantic"]
    assert (res["cut"], res["never_ended"], res["of"]) == (int(cut), 0, 1)
    run = res["runs"][0]
    assert run["ended_by"] == "silence" and -0.06 <= run["after_end_s"] <= 0.1  # known at ~0.2 s, spoken to 0.25 s


def test_a_question_without_a_pause_is_never_counted_cut():
    whole = turns.Spoken(np.zeros(int(0.3 * RATE), np.float32), "What is this?", 0.05, 0.25)
    res = turns.cut_off(lambda rule: EndsAt(0.10, at_s=0.1), ("silence",), [whole], CHUNK_S)["silence"]
    assert res["cut"] == 0 and res["never_ended"] == 0


def test_hear_turn_plays_in_real_time_and_waits_for_a_verdict_only_until_the_next_chunk():
    taker = EndsAt(None)
    ended, at = turns.hear_turn(taker, np.zeros(int(0.2 * RATE), np.float32), CHUNK_S)
    assert ended is None and 0.19 <= at <= 0.5  # four chunks, sent 50 ms apart; never ended: all of it fed
    assert len(taker.waits) == 4 and all(0 < w <= CHUNK_S + 0.01 for w in taker.waits), taker.waits


def test_hear_turn_reports_when_the_end_was_known():
    taker = EndsAt(0.1, at_s=0.15)
    ended, at = turns.hear_turn(taker, np.zeros(int(0.4 * RATE), np.float32), CHUNK_S)
    assert ended.end_s == 0.1 and 0.14 <= at <= 0.3 and taker.fed == int(0.15 * RATE)


class Voice:
    """eSpeak NG as `speak` uses it: each part is 0.1 s of quiet, a 0.2 s tone whose first and last samples are
    faint (under the 0.02 `speak` trims at), and 0.1 s of quiet."""

    sample_rate = RATE

    def synthesize(self, text: str, voice: str, wpm: int) -> np.ndarray:
        tone = np.where(np.arange(int(0.2 * RATE)) % 2, 0.5, -0.5).astype(np.float32)
        tone[0] = tone[-1] = 0.01
        quiet = np.zeros(int(0.1 * RATE), np.float32)
        return np.concatenate([quiet, tone, quiet])


def test_speak_lays_out_the_parts_with_the_pause_between_and_knows_where_each_is():
    spoken = turns.speak(Voice(), ("What color is", "the shirt?"), 140, pause_s=0.5, lead_s=0.25, tail_s=1.0)
    voiced = (int(0.2 * RATE) - 2) / RATE  # a tone less its faint first and last samples
    assert spoken.text == "What color is the shirt?"
    assert spoken.start_s == 0.25 and spoken.pause_s == pytest.approx((0.25 + voiced, 0.75 + voiced))
    assert spoken.end_s == pytest.approx(0.75 + 2 * voiced)
    assert spoken.audio.size == round((0.25 + 0.5 + 1.0 + 2 * voiced) * RATE)
    loud = np.flatnonzero(np.abs(spoken.audio) > 0.02) / RATE
    assert loud[0] == pytest.approx(spoken.start_s, abs=2 / RATE)
    assert loud[-1] == pytest.approx(spoken.end_s, abs=2 / RATE)
    whole = turns.speak(Voice(), ("What is this?",), 140)
    assert whole.pause_s is None and whole.end_s == pytest.approx(0.5 + voiced)


def test_hear_turn_out_of_real_time_waits_for_every_verdict_and_counts_in_the_audios_seconds():
    taker = EndsAt(0.1, at_s=0.15)
    ended, at = turns.hear_turn(taker, np.zeros(int(2.0 * RATE), np.float32), CHUNK_S, realtime=False)
    assert ended.end_s == 0.1 and at == pytest.approx(0.15)  # the chunk it ended in, however fast this machine is
    assert taker.waits == [turns._VERDICT_WAIT_S] * 3
    never, at = turns.hear_turn(EndsAt(None), np.zeros(int(2.0 * RATE), np.float32), CHUNK_S, realtime=False)
    assert never is None and at == pytest.approx(2.0)
