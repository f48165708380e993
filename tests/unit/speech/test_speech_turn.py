"""The end-of-turn rules with a loudness VAD and a scripted transcriber (fast, no models); the same on real
speech with Silero VAD and Whisper is tests/integration/test_turn_taking.py."""

import logging
import threading

import numpy as np
import pytest

from fastvlm.speech import SpeechConfig, SpeechStarted, Transcript
from fastvlm.speech.judge import TranscriptJudge, load_judge
from fastvlm.speech.turn import TurnEnded, TurnLikelyEnded, TurnResumed, TurnTaker
from fastvlm.speech.vad import Paused, TurnDetector

RATE = 16_000
CONFIRM_S = SpeechConfig().turn_confirm_silence_ms / 1000  # 550 ms
HOLD_S = SpeechConfig().turn_hold_ms / 1000  # 150 ms


class LoudnessVad:
    def initial_state(self):
        return 0

    def __call__(self, windows, state):
        return (np.abs(windows).max(axis=1) > 0.1).astype(np.float32), state


class ScriptedTranscriber:
    """Says `texts[k]` for the audio heard up to the k-th stretch of speech (each `voice()` is one word group)."""

    def __init__(self, *texts, gate=None):
        self.texts, self.gate, self.calls = texts, gate, []

    def transcribe(self, audio):
        if self.gate is not None:
            self.gate.wait(5)
        n = audio.size // 512
        loud = np.abs(audio[: n * 512]).reshape(n, 512).max(axis=1) > 0.1  # per VAD window
        groups = int(loud[0]) + int(np.count_nonzero(loud[1:] & ~loud[:-1]))  # stretches of speech heard
        self.calls.append(groups)
        text = self.texts[min(groups, len(self.texts)) - 1]
        return Transcript(text, "en", audio.size / RATE, elapsed_s=0.01)


def voice(seconds):
    return (0.5 * np.sin(np.arange(int(RATE * seconds)) * 0.3)).astype(np.float32)


def quiet(seconds):
    return np.zeros(int(RATE * seconds), np.float32)


def room(seconds):
    """A quiet room (-66 dBFS of noise): unlike digital silence (`quiet`), the detector shows it to the VAD."""
    return (0.0005 * np.random.default_rng(0).standard_normal(int(RATE * seconds))).astype(np.float32)


def hear(taker, audio, chunk_s=0.1, settle_s=5.0):
    """Feed in chunks; after each, wait for a verdict (verdicts come at once in stream time). (event, seconds fed)."""
    step, out = int(RATE * chunk_s), []
    for i in range(0, audio.size, step):
        events = taker.feed(RATE, audio[i : i + step])
        events += taker.settle(settle_s)
        out += [(e, (i + step) / RATE) for e in events]
    return out


def ends(events):
    return [(e, t) for e, t in events if isinstance(e, TurnEnded)]


def semantic(transcriber, likely_events=False, **options):
    return TurnTaker(LoudnessVad(), transcriber, SpeechConfig(**options), TranscriptJudge(), "semantic",
                     likely_events=likely_events)


@pytest.mark.parametrize("text, complete, unsure", [
    ("What color is the square?", True, False), ("What is this?", True, False), ("Describe the image.", True, False),
    ("What is that?", True, True), ("What am I pointing at?", True, True), ("Do you know what this is?", True, True),
    ("What color is that?", True, True),  # also Whisper's way of hearing "What color is the": a longer silence
    ("What is written on", False, False), ("What color is the?", False, False), ("Where is", False, False),
    ("What kind of...", False, False), ("Is it red, ", False, False), ("um", False, False), ("", False, False),
    ("   ", False, False),
    # people's speech (bench-turns): a word that can end a sentence, then a full stop, is unsure as with "?";
    # a negation, a conjunction or "oh" before a pause leaves the sentence open
    ("I didn't know that.", True, True), ("I think it might.", True, True), ("Is it hot or not?", True, True),
    ("This is not", False, False), ("And yet", False, False), ("neither this nor", False, False),
    ("Then he said with the loans, oh.", False, False),
])  # fmt: skip
def test_the_transcript_judge_hears_a_question_that_trails_off(text, complete, unsure):
    verdict = TranscriptJudge().judge(np.zeros(10, np.float32), Transcript(text, "en", 1.0))
    assert (verdict.complete, verdict.unsure) == (complete, unsure), verdict.reason


def test_a_judge_is_chosen_by_its_flag_name():
    assert isinstance(load_judge("transcript"), TranscriptJudge)  # "smart-turn": tests/integration/test_turn_taking.py
    with pytest.raises(ValueError, match="'transcript' or 'smart-turn'"):
        load_judge("smart_turn")


def test_an_unsure_question_ends_after_the_unsure_silence_not_the_fallback():
    """"What is that?" waited the 2 s fallback, like "What color is the"; a pause shorter than the unsure silence
    is still waited out."""
    unsure_s = SpeechConfig().turn_unsure_silence_ms / 1000  # 1 s
    taker = semantic(ScriptedTranscriber("What is that?"), likely_events=True)
    events = hear(taker, np.concatenate([voice(1.0), quiet(3.0)]))
    [(end, seen)] = ends(events)
    assert end.by == "judge" and end.verdict.unsure
    assert unsure_s <= seen - 1.0 <= unsure_s + 0.1 + 0.04
    assert any(isinstance(e, TurnLikelyEnded) for e, _ in events)  # the answer may begin at the verdict
    taker = semantic(ScriptedTranscriber("What is that?", "What is that red thing?"), likely_events=True)
    events = hear(taker, np.concatenate([voice(1.0), quiet(0.8), voice(0.6), quiet(1.5)]))
    [(end, seen)] = ends(events)
    assert end.transcript.result().text == "What is that red thing?"  # the 0.8 s pause did not cut it


def test_the_detector_reports_each_pause_once_with_the_speech_so_far():
    d = TurnDetector(LoudnessVad(), SpeechConfig(speech_pad_ms=0), end_silence_ms=1000, pause_ms=200)
    fed = np.concatenate([quiet(0.5), voice(1.0), quiet(0.4), voice(0.5), quiet(1.2)])
    events = [e for i in range(0, fed.size, 1600) for e in d.feed(RATE, fed[i : i + 1600])]
    assert [type(e).__name__ for e in events] == ["SpeechStarted", "Paused", "Paused", "UtteranceEnded"]
    first, second = events[1], events[2]
    assert first.end_s == pytest.approx(1.5, abs=0.04) and first.audio.size / RATE == pytest.approx(1.0, abs=0.04)
    assert second.start_s == first.start_s and second.end_s == pytest.approx(2.4, abs=0.04)
    assert events[3].end_s == second.end_s and d.fed_s == fed.size / RATE
    d.reset()
    assert d.speech_so_far() is None
    gap = np.concatenate([voice(1.0), quiet(0.15), voice(0.5)])  # shorter than pause_ms: no pause
    events = [e for i in range(0, gap.size, 1600) for e in d.feed(RATE, gap[i : i + 1600])]
    assert [type(e).__name__ for e in events] == ["SpeechStarted"]
    assert d.speech_so_far().size / RATE == pytest.approx(gap.size / RATE, abs=0.04)  # all of it: one question


def test_end_now_ends_only_while_that_pause_lasts():
    d = TurnDetector(LoudnessVad(), SpeechConfig(), end_silence_ms=1000, pause_ms=200)
    for chunk in (voice(1.0), quiet(0.3)):
        events = d.feed(RATE, chunk)
    pause = next(e for e in events if isinstance(e, Paused))
    assert d.silence_s(pause.end_s) == pytest.approx(0.3, abs=0.064)  # up to a window either end
    d.feed(RATE, voice(0.3))  # the person goes on
    assert d.silence_s(pause.end_s) is None and d.end_now(pause.end_s) is None
    events = d.feed(RATE, quiet(0.3))
    later = next(e for e in events if isinstance(e, Paused))
    ended = d.end_now(later.end_s)
    assert ended is not None and ended.start_s == pause.start_s and ended.end_s == later.end_s


def test_a_finished_question_is_likely_over_at_its_first_short_pause_and_over_at_min_silence():
    transcriber = ScriptedTranscriber("What color is the square?")
    taker = semantic(transcriber, likely_events=True)  # turn_pause_ms 120, turn_confirm_silence_ms 550
    events = hear(taker, np.concatenate([quiet(0.5), voice(1.5), quiet(2.5)]))
    assert isinstance(events[0][0], SpeechStarted)
    [(likely, told)] = [(e, t) for e, t in events if isinstance(e, TurnLikelyEnded)]
    assert likely.end_s == pytest.approx(2.0, abs=0.04) and likely.verdict.complete
    assert told - 2.0 <= 0.2 + 0.1 + 0.04  # the pause, one chunk, one window: the answer may begin
    [(end, seen)] = ends(events)
    assert end.by == "judge" and end.verdict.complete and end.end_s == likely.end_s and not end.truncated
    assert CONFIRM_S <= seen - 2.0 <= CONFIRM_S + 0.1 + 0.04  # played once the silence confirms it
    assert end.transcript is likely.transcript and transcriber.calls == [1]
    assert end.transcript.result().text == "What color is the square?"
    assert not any(isinstance(e, TurnResumed) for e, _ in events)
    plain = hear(semantic(ScriptedTranscriber("What color is the square?"), likely_events=False),
                 np.concatenate([quiet(0.5), voice(1.5), quiet(2.5)]))  # without likely_events: as before
    assert [type(e) for e, _ in plain] == [SpeechStarted, TurnEnded] and plain[1][1] - 2.0 <= 0.2 + 0.1 + 0.04


def test_an_unfinished_question_waits_for_the_fallback_silence():
    taker = semantic(ScriptedTranscriber("What color is the"), turn_max_silence_ms=2000, likely_events=True)
    events = hear(taker, np.concatenate([voice(1.0), quiet(3.0)]))
    [(end, seen)] = ends(events)
    assert end.by == "fallback" and end.verdict is not None and not end.verdict.complete and not end.truncated
    assert [type(e) for e, _ in events] == [SpeechStarted, TurnEnded]  # never likely over, so nothing withdrawn
    assert 1.0 + 2.0 <= seen <= 1.0 + 2.0 + 0.15
    assert end.transcript is not None  # the transcript begun at its pause is still the one used


@pytest.mark.parametrize("heard", ["Um, uh...", ""])
def test_speech_over_an_answer_with_no_words_is_over_at_the_confirming_silence(heard):
    audio = np.concatenate([voice(0.9), quiet(3.0)])
    over = semantic(ScriptedTranscriber(heard), likely_events=True)
    over.over_answer = True  # the caller says the speech began over an answer
    [(end, seen)] = ends(hear(over, audio))
    assert end.by == "no_words" and end.transcript.result().text == heard
    assert 0.9 + CONFIRM_S <= seen <= 0.9 + CONFIRM_S + HOLD_S + 0.1
    assert not over.over_answer  # the next speech says for itself
    over.over_answer = True
    over.reset()
    assert not over.over_answer
    alone = semantic(ScriptedTranscriber(heard), likely_events=True)  # not over an answer: waited for, as before
    [(end, seen)] = ends(hear(alone, audio))
    assert end.by == "fallback" and seen >= 0.9 + 2.0


def test_speech_over_an_answer_that_goes_on_after_an_um_is_one_question():
    transcriber = ScriptedTranscriber("Um", "Um, what is written on the sign?")
    taker = semantic(transcriber, likely_events=True)
    taker.over_answer = True
    [(end, _)] = ends(hear(taker, np.concatenate([voice(0.4), quiet(0.4), voice(1.2), quiet(2.0)])))
    assert end.by == "judge" and end.transcript.result().text == "Um, what is written on the sign?"


def test_a_pause_mid_sentence_is_waited_out_when_the_words_so_far_are_unfinished():
    transcriber = ScriptedTranscriber("What color is", "What color is the shirt I am wearing?")
    taker = semantic(transcriber)
    [(end, _)] = ends(hear(taker, np.concatenate([voice(0.8), quiet(0.5), voice(1.2), quiet(2.5)])))
    assert end.by == "judge" and end.end_s == pytest.approx(2.5, abs=0.04)
    assert end.transcript.result().text == "What color is the shirt I am wearing?"


def test_min_silence_keeps_a_finished_sounding_half_from_ending_a_longer_pause():
    script = ("What am I holding", "What am I holding in my right hand?")
    audio = np.concatenate([voice(0.8), quiet(0.5), voice(1.0), quiet(2.5)])
    cut = ends(hear(semantic(ScriptedTranscriber(*script)), audio))  # 200 ms
    assert cut[0][0].end_s == pytest.approx(0.8, abs=0.04)  # verdicts at once: the half was taken for the end
    kept = ends(hear(semantic(ScriptedTranscriber(*script), turn_min_silence_ms=600), audio))
    assert len(kept) == 1 and kept[0][0].end_s == pytest.approx(2.3, abs=0.04)


def test_a_finished_sounding_half_is_likely_over_then_resumed_and_the_whole_question_ends():
    script = ("What am I holding", "What am I holding in my right hand?")
    events = hear(semantic(ScriptedTranscriber(*script), likely_events=True),
                  np.concatenate([voice(0.8), quiet(0.5), voice(1.0), quiet(2.5)]))
    kinds = [type(e).__name__ for e, _ in events]
    assert kinds == ["SpeechStarted", "TurnLikelyEnded", "TurnResumed", "TurnLikelyEnded", "TurnEnded"]
    first, resumed, second, end = (e for e, _ in events[1:])
    assert first.end_s == pytest.approx(0.8, abs=0.04) and resumed.end_s == first.end_s  # withdrawn
    assert second.end_s == end.end_s == pytest.approx(2.3, abs=0.04)
    assert end.transcript.result().text == "What am I holding in my right hand?"


def test_a_likely_end_is_withdrawn_when_speech_resumes_within_a_chunk():
    """Speech comes back inside the chunk that brings no new pause: TurnResumed all the same."""
    taker = semantic(ScriptedTranscriber("What am I holding", "What am I holding now?"), likely_events=True)
    events = hear(taker, np.concatenate([voice(0.8), quiet(0.3)]))
    assert [type(e).__name__ for e, _ in events] == ["SpeechStarted", "TurnLikelyEnded"]
    events = hear(taker, np.concatenate([quiet(0.1), voice(0.1)]), chunk_s=0.2)  # shorter than a pause
    assert [type(e) for e, _ in events] == [TurnResumed]


class LateVad:
    """Hears speech from its third loud window on: 64 ms late, as Silero can be when a person speaks on."""

    def initial_state(self):
        return 0

    def __call__(self, windows, state):
        heard = []
        for window in windows:
            state = state + 1 if np.abs(window).max() > 0.1 else 0
            heard.append(float(state >= 3))
        return np.array(heard, np.float32), state


def test_sound_back_in_a_pause_holds_the_end_until_the_vad_hears_the_person_go_on():
    """A 0.56 s pause the late VAD counts as ~0.62 s, past the 550 ms confirm: the sound that ends it holds the end."""
    script = ("What am I holding", "What am I holding in my right hand?")
    audio = np.concatenate([room(0.5), voice(1.0), room(0.56), voice(1.0), room(2.5)])

    def taker(**options):
        return TurnTaker(LateVad(), ScriptedTranscriber(*script), SpeechConfig(**options), TranscriptJudge(),
                         "semantic", likely_events=True)

    cut = ends(hear(taker(turn_hold_ms=0), audio, chunk_s=0.04))
    assert cut[0][0].end_s == pytest.approx(1.5, abs=0.04)  # without the hold the half was the question
    events = hear(taker(), audio, chunk_s=0.04)
    [(end, _)] = ends(events)
    assert end.end_s == pytest.approx(3.06, abs=0.04) and end.transcript.result().text == script[1]
    assert [type(e) for e, _ in events].count(TurnResumed) == 1


class LateEndVad:
    """Hears speech stop from its `late`-th quiet window: 64 ms late by default, as Silero often is."""

    def __init__(self, late=3):
        self.late = late

    def initial_state(self):
        return 0

    def __call__(self, windows, state):
        heard = []
        for window in windows:
            state = 0 if np.abs(window).max() > 0.1 else state + 1
            heard.append(float(state < self.late))
        return np.array(heard, np.float32), state


def late_ending(*script, late=3, **options):
    return TurnTaker(LateEndVad(late), ScriptedTranscriber(*script), SpeechConfig(**options), TranscriptJudge(),
                     "semantic", likely_events=True)


def test_the_confirming_silence_counts_from_where_the_voice_stopped_not_from_the_late_vad():
    events = hear(late_ending("What color is the square?"), np.concatenate([voice(1.024), room(1.5)]), chunk_s=0.04)
    [(likely, _)] = [(e, t) for e, t in events if isinstance(e, TurnLikelyEnded)]
    [(end, seen)] = ends(events)
    assert end.end_s == likely.end_s == pytest.approx(1.024 + 0.064)  # the VAD's pause names the turn
    assert CONFIRM_S <= seen - 1.024 <= CONFIRM_S + 0.04  # the silence heard, to within a chunk
    very_late = hear(late_ending("What color is the square?", late=7), np.concatenate([voice(1.024), room(1.5)]),
                     chunk_s=0.04)  # the VAD's end 192 ms late: the silence is looked for only 96 ms before it
    [(_, seen)] = ends(very_late)
    assert CONFIRM_S + 0.096 <= seen - 1.024 <= CONFIRM_S + 0.096 + 0.04


def test_a_words_fading_end_in_a_noisy_room_counts_as_voice_not_silence():
    """A room at -43 dBFS and a word's last 32 ms 9.5 dB over it: the silence counts from after that fade."""
    hum = (0.01 * np.sin(np.arange(int(RATE * 1.5)) * 0.2)).astype(np.float32)
    fade = (0.03 * np.sin(np.arange(int(RATE * 0.032)) * 0.3)).astype(np.float32)
    audio = np.concatenate([voice(1.024), fade, hum])
    [(end, seen)] = ends(hear(late_ending("What color is the square?"), audio, chunk_s=0.04))
    assert CONFIRM_S <= seen - 1.056 <= CONFIRM_S + 0.04


def test_a_pause_shorter_than_the_confirming_silence_is_not_the_end_when_the_vad_hears_it_late():
    """0.53 s of silence, which the late VAD takes for 0.59 s: the person goes on (no hold to save it)."""
    script = ("What am I holding", "What am I holding in my right hand?")
    audio = np.concatenate([voice(1.024), quiet(0.53), voice(1.0), quiet(2.5)])
    [(end, _)] = ends(hear(late_ending(*script, turn_hold_ms=0), audio, chunk_s=0.04))
    assert end.end_s > 2.5 and end.transcript.result().text == script[1]


def test_a_sound_the_vad_never_calls_speech_holds_the_end_only_turn_hold_ms():
    hum = (0.05 * np.sin(np.arange(int(RATE * 1.5)) * 0.2)).astype(np.float32)  # below LoudnessVad's 0.1
    audio = np.concatenate([voice(1.0), quiet(0.55), hum])
    taker = semantic(ScriptedTranscriber("What is this?"), likely_events=True)
    [(end, seen)] = ends(hear(taker, audio, chunk_s=0.04))
    assert end.by == "judge" and end.end_s == pytest.approx(1.0, abs=0.04)
    assert 1.0 + CONFIRM_S + HOLD_S <= seen <= 1.0 + CONFIRM_S + HOLD_S + 0.08  # the whole hold, a chunk, a window


def test_speech_that_resumes_before_the_verdict_is_not_cut():
    gate = threading.Event()
    taker = semantic(ScriptedTranscriber("What am I holding", "What am I holding in my hand?", gate=gate))
    events = hear(taker, np.concatenate([voice(0.8), quiet(0.3)]), settle_s=0)
    assert taker.pending and ends(events) == []
    events = hear(taker, voice(0.5), settle_s=0)  # the person goes on while Whisper still works
    gate.set()
    events += hear(taker, quiet(0.05))
    assert ends(events) == []  # the verdict came for a pause that is over
    [(end, _)] = ends(hear(taker, quiet(1.0)))
    assert end.end_s == pytest.approx(1.6, abs=0.04) and end.by == "judge"
    assert not taker.pending  # no pause goes on


def test_settle_waits_for_the_verdict_on_the_pause_going_on():
    gate = threading.Event()
    taker = semantic(ScriptedTranscriber("What color is the square?", gate=gate))
    hear(taker, np.concatenate([voice(1.0), quiet(0.3)]), settle_s=0)
    assert taker.pending and taker.settle(0) == []
    threading.Timer(0.2, gate.set).start()
    [end] = taker.settle(0.5 + 0.2)  # no more audio: the verdict alone ends the turn
    assert isinstance(end, TurnEnded) and end.by == "judge" and not taker.pending


def test_the_silence_rule_ends_after_end_silence_and_reuses_the_transcript_begun_at_its_pause():
    transcriber = ScriptedTranscriber("What is this?")
    taker = TurnTaker(LoudnessVad(), transcriber, SpeechConfig(end_silence_ms=700), rule="silence", early_stt_ms=300)
    [(end, seen)] = ends(hear(taker, np.concatenate([voice(1.0), quiet(1.5)])))
    assert end.by == "silence" and end.verdict is None and 1.7 <= seen <= 1.7 + 0.15
    assert end.transcript.result().text == "What is this?" and transcriber.calls == [1]


class BrokenJudge:
    needs_transcript = False

    def judge(self, audio, transcript):
        raise RuntimeError("onnxruntime exploded")


def test_a_failing_judge_leaves_the_fallback_silence_to_end_the_turn():
    taker = TurnTaker(LoudnessVad(), ScriptedTranscriber("What is this?"), SpeechConfig(), BrokenJudge(), "semantic")
    [(end, seen)] = ends(hear(taker, np.concatenate([voice(1.0), quiet(2.5)])))
    assert end.by == "fallback" and seen >= 3.0 and end.transcript.result().text == "What is this?"


def test_a_failing_judges_warning_is_logged_once_per_pause(caplog):
    taker = TurnTaker(LoudnessVad(), ScriptedTranscriber("What is", "What is this?"), SpeechConfig(), BrokenJudge(),
                      "semantic")
    with caplog.at_level(logging.WARNING, logger="fastvlm.speech.turn"):
        [(end, _)] = ends(hear(taker, np.concatenate([voice(1.0), quiet(0.5), voice(1.0), quiet(2.5)])))
    assert end.by == "fallback"
    warned = [r for r in caplog.records if "judge failed" in r.getMessage()]
    assert len(warned) == 2, [r.getMessage() for r in warned]  # two pauses, one each (not one per chunk)


def test_rules_and_their_settings_are_checked():
    with pytest.raises(ValueError, match="end-of-turn rule"):
        TurnTaker(LoudnessVad(), ScriptedTranscriber("x"), rule="psychic")
    with pytest.raises(ValueError, match="TurnJudge"):
        TurnTaker(LoudnessVad(), ScriptedTranscriber("x"), SpeechConfig(), None, "semantic")
    with pytest.raises(ValueError, match="turn_min_silence_ms"):
        SpeechConfig(turn_pause_ms=300, turn_min_silence_ms=200)
    with pytest.raises(ValueError, match="turn_confirm_silence_ms"):
        SpeechConfig(turn_confirm_silence_ms=2500)
    with pytest.raises(ValueError, match="turn_hold_ms"):
        SpeechConfig(turn_hold_ms=-1)


def test_a_likely_end_is_withdrawn_when_the_speech_it_resumed_into_is_cut_at_max_audio_in_one_chunk():
    """The question ends elsewhere (cut at `max_audio_s`) within the chunk that resumes it: TurnResumed first."""
    taker = semantic(ScriptedTranscriber("What am I holding", "What am I holding now?"), likely_events=True,
                     max_audio_s=3.0)
    events = hear(taker, np.concatenate([voice(0.8), quiet(0.3)]))
    [likely] = [e for e, _ in events if isinstance(e, TurnLikelyEnded)]
    events = taker.feed(RATE, voice(3.0))  # one long chunk (an API client's): speaks on, past max_audio_s
    assert [type(e) for e in events] == [TurnResumed, TurnEnded]
    assert events[0].end_s == likely.end_s and events[1].by == "max_audio" and events[1].end_s != likely.end_s
