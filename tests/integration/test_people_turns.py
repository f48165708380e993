"""The end-of-turn rules on people's recorded speech (fastvlm/bench/people: a lecture, a TV news report and a phone
call from two PyPI archives, which .ci/run downloads), heard by the real Silero VAD and Whisper tiny.en, every
verdict waited for (`hear_turn(realtime=False)`), so the outcome does not depend on this machine's speed.

What people do that eSpeak NG's questions do not: pause mid-sentence for 0.3-1 s, restart ("This is not... This is
not a normal situation"), end a sentence on a word a question seldom ends on ("I didn't know that.")."""

from __future__ import annotations

import pytest

from fastvlm.bench.people import recordings, run
from fastvlm.bench.people.labels import UNITS
from fastvlm.speech.config import SpeechConfig
from fastvlm.speech.silero import silero_vad
from tests.installed import load_whisper, skip_missing_ci

CONFIG = SpeechConfig(download=False, threads=2, speech_pad_ms=400)  # as app.py
CHUNK_S = 0.04  # as the voice line sends it
ARCHIVE = {"lecture": "silero-vad", "news": "silero-vad", "call": "pyannote.audio"}


@pytest.fixture(scope="module")
def whisper():
    return load_whisper(CONFIG)


def _units(*names: str) -> list:
    try:
        return recordings.units(names)
    except recordings.PeopleMissing as e:
        skip_missing_ci(ARCHIVE[names[0]], f"people's speech is not downloaded: {e}")


@pytest.fixture(scope="module")
def heard(whisper):
    """The app's rule (semantic, transcript judge) on every unit of the three recordings -> rows."""
    units = _units("lecture", "news") + _units("call")
    judges: dict = {}
    return run.hear(lambda: run.taker_for("transcript", silero_vad(), whisper, CONFIG, judges), units, CHUNK_S,
                    realtime=False)


def test_the_calls_labels_quote_its_own_transcript():
    _units("call")
    assert " ".join(u.text for u in UNITS["call"]) == recordings.call_reference(recordings.DEFAULT_DIR)


def test_every_finished_sentence_ends_by_the_judge_not_the_fallback_silence(heard):
    """Before stop 60 five did not ("I didn't know that.", "I think it might.": a word a question seldom ends on,
    then a full stop) and waited 2 s of silence; now such an end is unsure and waits 1 s."""
    ends = [r for r in heard if r["finished"] and not r["cut"] and r["ended_by"] is not None]
    assert len(ends) >= 40 and [r["text"] for r in ends if r["ended_by"] != "judge"] == []
    assert max(r["after_end_s"] for r in ends) <= CONFIG.turn_unsure_silence_ms / 1000 + 0.2


def test_people_pausing_mid_sentence_are_seldom_cut(heard):
    """3 of the 12 units with a pause inside are cut here: "…in his book. [1.06 s] Capital in the 21st century…",
    "We got [1.02 s] a redhead…" and "And I say [0.51 s, heard as 'And I see.'] what in the world…" (docs/speech.md);
    the fixed 0.7 s silence rule cuts 3 too. Before stop 60 "This is not [0.61 s] This is not a normal situation"
    was a fourth (a sentence does not end on 'not')."""
    paused = [r for r in heard if r["mids"]]
    assert len(paused) == 12 and sum(r["cut"] for r in paused) <= 3, [r["text"] for r in paused if r["cut"]]
    assert all(r["ended_by"] is not None for r in paused)


def test_the_fixed_silence_rule_cuts_the_lecturer_where_the_judge_waits(whisper):
    """"…develops theories that take no account of [0.80 s] where we actually are…": the silence rule ends the turn
    after 0.7 s; the transcript ends on 'of', so the judge waits (the test that a cut is seen where one happens)."""
    [(name, unit, spoken)] = [item for item in _units("lecture") if item[1].start_s == 9.34]
    judges: dict = {}
    rows = {rule: run.hear(lambda rule=rule: run.taker_for(rule, silero_vad(), whisper, CONFIG, judges),
                           [(name, unit, spoken)], CHUNK_S, realtime=False)[0] for rule in ("silence", "transcript")}
    assert rows["silence"]["cut"] and rows["silence"]["ended_at_s"] == pytest.approx(19.58, abs=0.1), rows["silence"]
    assert rows["silence"]["heard"].rstrip(". ").lower().endswith("account of")
    assert not rows["transcript"]["cut"], rows["transcript"]


def test_whisper_hears_the_phone_call_with_at_most_a_quarter_of_its_words_wrong(heard):
    """0.20-0.23 here (Whisper tiny.en on 8 kHz telephone speech with the other person overlapping)."""
    assert run.summary(heard)["call_wer"] <= 0.25
