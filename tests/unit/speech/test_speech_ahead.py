"""Words ahead: while a question is spoken, once its frame is prepared, its words so far are transcribed every
`words_ahead_s` of speech and come out of the turn taker as `HeardSoFar` (a loudness VAD and a transcriber that
counts what it hears; no models)."""

from concurrent.futures import Future, wait

import numpy as np
import pytest

from fastvlm.speech import HeardSoFar, SpeechConfig, SpeechStarted, Transcript
from fastvlm.speech.ahead import WordsAhead, words_before_last
from fastvlm.speech.judge import TranscriptJudge
from fastvlm.speech.turn import TurnEnded, TurnLikelyEnded, TurnTaker
from tests.unit.speech.test_speech_turn import LoudnessVad, quiet, voice

RATE = 16_000
WORDS = ["What", "am", "I", "holding", "in", "my", "right", "hand", "today"]


class WordPerQuarterSecond:
    """Hears one word of `WORDS` per 0.25 s of audio."""

    def __init__(self):
        self.heard_s: list[float] = []

    def transcribe(self, audio):
        self.heard_s.append(audio.size / RATE)
        text = " ".join(WORDS[: max(1, int(audio.size / RATE / 0.25))]) + "?"
        return Transcript(text, "en", audio.size / RATE, elapsed_s=0.01)


def taker_for(every_s=0.5):
    stt = WordPerQuarterSecond()
    config = SpeechConfig(speech_pad_ms=0, words_ahead_s=every_s)
    return TurnTaker(LoudnessVad(), stt, config, TranscriptJudge(), "semantic", likely_events=True), stt


def feed(taker, stt, audio, chunk_s=0.04):
    """Feed in chunks; a transcription begun by a chunk is let finish before the next one (as if instant)."""
    out, step = [], int(RATE * chunk_s)
    for i in range(0, audio.size, step):
        out += taker.feed(RATE, audio[i : i + step])
        if taker.ahead.pending is not None:
            wait([taker.ahead.pending], 1)  # told with the next chunk
        out += taker.settle(1.0)
    return out


def test_nothing_is_transcribed_ahead_until_the_questions_frame_is_prepared():
    taker, stt = taker_for()
    events = feed(taker, stt, voice(1.5))
    assert any(isinstance(e, SpeechStarted) for e in events)
    assert stt.heard_s == [] and not any(isinstance(e, HeardSoFar) for e in events)


def test_once_wanted_the_words_so_far_come_every_interval_of_speech_all_but_the_last():
    taker, stt = taker_for(every_s=0.5)
    events = feed(taker, stt, voice(0.3))
    start = next(e.at_s for e in events if isinstance(e, SpeechStarted))
    taker.want_words(start)
    events = feed(taker, stt, voice(1.3))
    heard = [e for e in events if isinstance(e, HeardSoFar)]
    assert len(stt.heard_s) == 3  # at 0.5, 1.0 and 1.5 s of speech
    assert np.diff(stt.heard_s).min() >= 0.5 - 0.05
    assert [h.start_s for h in heard] == [start] * len(heard) and len(heard) >= 2
    for h, seconds in zip(heard, stt.heard_s):
        spoken = WORDS[: int(seconds / 0.25)]
        assert h.words == " ".join(spoken[:-1])  # the last word may be cut off: never prefilled


def test_no_words_ahead_for_another_question_nor_in_a_pause_nor_after_the_end():
    taker, stt = taker_for(every_s=0.3)
    events = feed(taker, stt, voice(0.3))
    start = next(e.at_s for e in events if isinstance(e, SpeechStarted))
    taker.want_words(start + 5.0)  # a later question's frame
    feed(taker, stt, voice(0.8))
    assert stt.heard_s == []
    taker.want_words(start)
    events = feed(taker, stt, quiet(0.4))  # a pause: its own transcription is the newer one, and finished
    kinds = [type(e) for e in events]
    assert TurnLikelyEnded in kinds and HeardSoFar not in kinds[kinds.index(TurnLikelyEnded):]
    assert len(stt.heard_s) <= 2  # one begun as the silence began (not yet heard as one), and the pause's
    calls = len(stt.heard_s)
    events = feed(taker, stt, quiet(2.5))  # the question ends
    assert any(isinstance(e, TurnEnded) for e in events)
    feed(taker, stt, quiet(1.0))
    assert len(stt.heard_s) == calls  # nothing transcribed ahead in the pause nor after the end


@pytest.mark.parametrize("text, words", [("What am I holding", "What am I"), ("Hi", ""), ("", ""),
                                         ("  What  color ", "What")])
def test_the_last_word_is_never_kept(text, words):
    assert words_before_last(text) == words


def test_words_ahead_must_not_be_negative():
    with pytest.raises(ValueError, match="words_ahead_s"):
        SpeechConfig(words_ahead_s=-1)


def test_words_ahead_go_on_after_a_pause_in_an_unfinished_question():
    """"What am I holding in my… right hand": the pause's transcript is judged unfinished and its words are the
    question's so far; the person goes on, and the words heard ahead go on with them (they stopped for good after
    the first such pause)."""
    taker, stt = taker_for(every_s=0.5)
    events = feed(taker, stt, voice(0.3))
    taker.want_words(next(e.at_s for e in events if isinstance(e, SpeechStarted)))
    before = [e for e in feed(taker, stt, voice(1.2)) if isinstance(e, HeardSoFar)]
    events = feed(taker, stt, quiet(0.2))  # 6 words so far: "… in my", unfinished
    assert not any(isinstance(e, (TurnLikelyEnded, TurnEnded)) for e in events)
    # the pause's own transcript ends on a whole word: all of it is the question so far, told once
    assert [e.words for e in events if isinstance(e, HeardSoFar)] == ["What am I holding in my"]
    after = [e for e in feed(taker, stt, voice(1.2)) if isinstance(e, HeardSoFar)]
    assert before and after and len(after[-1].words.split()) > len(before[-1].words.split()) + 1


def test_the_frame_of_a_first_sound_too_short_serves_the_question_after_it_but_never_the_next_question():
    """The frame is taken at the first sound of speech; a sound too short to be speech may come first (eSpeak NG's
    "What" is heard as two), and the question then begins a little later: its words are still wanted. A frame
    prepared for a question that has ended never makes the next one's words wanted."""
    taker, stt = taker_for(every_s=0.5)
    feed(taker, stt, np.concatenate([voice(0.1), quiet(0.1)]))  # too short: no question
    events = feed(taker, stt, voice(0.3))
    start = next(e.at_s for e in events if isinstance(e, SpeechStarted))
    assert start > 0
    taker.want_words(0.0)  # the frame of the first sound
    assert any(isinstance(e, HeardSoFar) for e in feed(taker, stt, voice(1.2)))
    events = feed(taker, stt, quiet(2.5))
    assert any(isinstance(e, TurnEnded) for e in events)
    calls = len(stt.heard_s)
    taker.want_words(start)  # late: that question is over
    feed(taker, stt, voice(1.5))
    assert len(stt.heard_s) == calls


def test_off_by_default_nothing_is_heard_ahead_not_even_at_an_unfinished_pause():
    stt = WordPerQuarterSecond()
    taker = TurnTaker(LoudnessVad(), stt, SpeechConfig(speech_pad_ms=0), TranscriptJudge(), "semantic",
                      likely_events=True)
    events = feed(taker, stt, voice(0.3))
    taker.want_words(next(e.at_s for e in events if isinstance(e, SpeechStarted)))
    events = feed(taker, stt, np.concatenate([voice(1.2), quiet(0.2), voice(1.2)]))
    assert len(stt.heard_s) == 1  # the pause's own transcription, judged unfinished
    assert not any(isinstance(e, HeardSoFar) for e in events)


class Speaking:
    """A detector hearing speech that began at `start_s` and has gone on `spoken_s` (None: silence)."""

    def __init__(self):
        self.now = None

    def speaking(self):
        return self.now

    def speech_so_far(self):
        return np.zeros(RATE, np.float32)


def ahead_of(every_s=0.5):
    begun = []

    def transcribe(audio):
        begun.append(audio.size)
        return Future()  # never finishes: one transcription at a time, so each test sees when the first begins

    return WordsAhead(transcribe, every_s), Speaking(), begun


def test_the_first_transcription_begins_once_exactly_every_s_has_been_spoken():
    ahead, detector, begun = ahead_of(every_s=0.5)
    ahead.want(10.0)  # a question 10 s into the stream
    detector.now = (10.0, 0.49)
    ahead.step(detector, busy=False)
    assert begun == []
    detector.now = (10.0, 0.5)
    ahead.step(detector, busy=False)
    assert begun == [RATE] and ahead.pending is not None


def test_a_frame_prepared_where_the_last_question_ended_serves_the_next_one():
    ahead, _, _ = ahead_of()
    ahead.reset(ended_s=2.0)
    ahead.want(1.9)  # before the end: the last question's
    assert ahead.wanted is None
    ahead.want(2.0)
    assert ahead.wanted == 2.0
