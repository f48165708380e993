import numpy as np
import pytest

from fastvlm.speech.config import SpeechConfig
from fastvlm.speech.vad import WINDOW, Paused, SpeechOnset, SpeechStarted, TurnDetector, UtteranceEnded
from fastvlm.speech.vad_stream import REFRESH_WINDOWS
from tests.unit.speech.test_speech_turn import LateEndVad, room

RATE = 16_000


class LoudnessVad:
    """Speech probability from loudness; counts the windows it is shown."""

    def __init__(self):
        self.windows = 0

    def initial_state(self):
        return 0

    def __call__(self, windows, state):
        self.windows += len(windows)
        return (np.abs(windows).max(axis=1) > 0.1).astype(np.float32), state + len(windows)


def silence(seconds):
    return np.zeros(int(RATE * seconds), np.float32)


def voice(seconds):
    return (0.5 * np.sin(np.arange(int(RATE * seconds)) * 0.3)).astype(np.float32)


def feed(detector, audio, chunk_s=0.1, rate=RATE):
    """Feed in chunks; return (event, seconds fed when it came) pairs."""
    step, out = int(rate * chunk_s), []
    for i in range(0, len(audio), step):
        out += [(e, (i + step) / rate) for e in detector.feed(rate, audio[i : i + step])]
    return out


def detector(**options):
    """A detector with 300 ms of padding unless told (the times below count on it)."""
    return TurnDetector(LoudnessVad(), SpeechConfig(**{"speech_pad_ms": 300, **options}))


def test_speech_then_silence_gives_start_then_end():
    d = detector()
    events = feed(d, np.concatenate([silence(1), voice(1.5), silence(1)]))
    (start, start_seen), (end, end_seen) = events
    assert isinstance(start, SpeechStarted) and isinstance(end, UtteranceEnded)
    assert start.at_s == pytest.approx(1.0, abs=WINDOW / RATE)
    assert start_seen <= 1.0 + 0.25 + 0.1 + 0.04  # min_speech_ms, one chunk, one window
    assert end.start_s == start.at_s and end.end_s == pytest.approx(2.5, abs=WINDOW / RATE)
    assert 2.5 + 0.7 <= end_seen <= 2.5 + 0.7 + 0.15  # end_silence_ms after the speech, within a chunk
    assert end.audio.size / RATE == pytest.approx(1.5 + 2 * 0.3, abs=0.07)  # padded both sides
    assert not end.truncated


def test_silence_and_short_clicks_are_not_speech():
    d = detector()
    audio = np.concatenate([silence(1), voice(0.1), silence(1), voice(0.15), silence(1)])
    assert feed(d, audio) == []


def test_speech_that_begins_while_strict_needs_strict_ms_to_be_a_question():
    d = detector()
    burst = np.concatenate([voice(0.3), silence(1)])
    d.strict_ms = 400  # e.g. the app's answer has just begun to sound
    assert feed(d, burst) == [] and not d.onset_strict
    d.feed(RATE, voice(0.1))
    assert d.onset_strict and 0 < d.onset_s < 0.4
    d.strict_ms = None  # set or not, what counts is when the speech began
    d.feed(RATE, voice(0.4))
    assert d.onset_s == 0  # a question now
    feed(d, silence(1))
    assert [type(e) for e, _ in feed(d, burst)] == [SpeechStarted, UtteranceEnded]  # 0.3 s: a question again


def test_a_short_pause_inside_a_question_does_not_end_it():
    d = detector()
    events = feed(d, np.concatenate([voice(1), silence(0.4), voice(1), silence(1)]))
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded]
    assert events[1][0].end_s == pytest.approx(2.4, abs=0.04)


def test_two_questions_give_two_turns():
    d = detector()
    events = feed(d, np.concatenate([voice(1), silence(1), voice(0.8), silence(1)]))
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded] * 2
    assert events[2][0].at_s == pytest.approx(2.0, abs=0.04)


@pytest.mark.parametrize("chunk_s", [0.01, 0.0333, 0.25, 5.0])
def test_events_do_not_depend_on_chunk_size(chunk_s):
    audio = np.concatenate([silence(0.5), voice(1), silence(1)])
    reference = feed(detector(), audio, 0.1)
    events = feed(detector(), audio, chunk_s)
    assert [(type(e), getattr(e, "at_s", None), getattr(e, "end_s", None)) for e, _ in events] == [
        (type(e), getattr(e, "at_s", None), getattr(e, "end_s", None)) for e, _ in reference
    ]


def test_each_window_is_judged_once():
    d = detector()
    feed(d, np.concatenate([voice(2), room(3)]), 0.05)
    assert d.vad.windows == int(5 * RATE) // WINDOW  # no re-running over the buffer


def test_digital_silence_is_silence_without_the_vad_and_its_state_passes_over_it():
    d = detector()
    events = feed(d, np.concatenate([silence(1), voice(1.5), silence(3)]), 0.05)
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded]
    assert events[1][0].end_s == pytest.approx(2.5, abs=WINDOW / RATE)
    assert d.vad.windows == -(-int(2.5 * RATE) // WINDOW) - int(1.0 * RATE) // WINDOW  # only windows with sound
    state = d._s.vad.state
    feed(d, np.concatenate([silence(0.5), np.full(WINDOW, 2 / 32768, np.float32)]))  # within 2 steps of 16-bit 0
    assert d._s.vad.state == state
    feed(d, np.full(WINDOW, 3 / 32768, np.float32))  # a real room's quiet: shown
    assert d._s.vad.state == state + 1


def test_the_vads_state_starts_again_after_two_seconds_of_quiet_outside_an_utterance():
    d = detector()
    feed(d, room(61 * WINDOW / RATE), 0.04)  # 61 heard windows, all quiet to the VAD: not yet
    assert d._s.vad.state == d.vad.windows == REFRESH_WINDOWS - 1
    feed(d, room(0.08), 0.04)  # the 62nd, then the next chunk starts from the initial state
    assert d._s.vad.state < d.vad.windows
    d = detector(end_silence_ms=3000)
    feed(d, np.concatenate([voice(1), room(2.5)]), 0.04)  # a 2.5 s pause inside the question: the state goes on
    assert d._s.utterance is not None and d._s.vad.state == d.vad.windows
    feed(d, room(0.6), 0.04)  # the question ended 3 s into the quiet: the state starts again
    assert d._s.utterance is None and d._s.vad.state < d.vad.windows


def test_the_quiet_before_a_restart_counts_from_the_last_window_heard_as_speech_within_a_chunk():
    d, one = detector(), room(WINDOW / RATE)
    d.feed(RATE, np.concatenate([voice(32 * WINDOW / RATE), room((REFRESH_WINDOWS - 1) * WINDOW / RATE)]))
    d.feed(RATE, one)  # the 62nd quiet window: judged before the count reaches the restart
    assert d._s.vad.state == d.vad.windows == 32 + REFRESH_WINDOWS
    d.feed(RATE, one)
    assert d._s.vad.state == 1  # started again, then this window


def test_microphone_format_48k_stereo_int16():
    mono = np.concatenate([silence(0.5), voice(1), silence(1)])
    at48 = np.repeat(mono, 3)
    stereo = (np.stack([at48, at48], axis=1) * 32767).astype(np.int16)
    events = feed(detector(), stereo, rate=48_000)
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded]
    assert events[0][0].at_s == pytest.approx(0.5, abs=0.04)
    assert events[1][0].audio.dtype == np.float32


def test_frames_of_a_few_samples_keep_stream_time():
    mono = np.concatenate([silence(0.5), voice(1), silence(1)])
    pcm = (np.repeat(mono, 3) * 32767).astype(np.int16)  # 48 kHz, in 10-sample frames
    events = feed(detector(), pcm, chunk_s=10 / 48_000, rate=48_000)
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded]
    assert events[0][0].at_s == pytest.approx(0.5, abs=0.04) and events[1][0].end_s == pytest.approx(1.5, abs=0.04)


def test_an_empty_chunk_is_no_event():
    assert detector().feed(48_000, np.zeros((0, 2), np.int16)) == []


@pytest.mark.parametrize("max_audio_s, pad_ms", [(2.0, 300), (2.048, 0)])  # 2.048 s: a whole number of windows
def test_speech_longer_than_the_limit_is_cut_there(max_audio_s, pad_ms):
    events = feed(detector(max_audio_s=max_audio_s, speech_pad_ms=pad_ms), np.concatenate([voice(3), silence(1)]))
    ends = [e for e, _ in events if isinstance(e, UtteranceEnded)]
    assert ends[0].truncated and ends[0].end_s == pytest.approx(max_audio_s - pad_ms / 1000, abs=0.04)  # lead-in
    assert ends[0].audio.size <= max_audio_s * RATE


@pytest.mark.parametrize("pause_s", [0.0, 0.4])  # none, or shorter than end_silence_ms
def test_speech_that_goes_on_past_the_limit_is_its_tail_until_the_end_silence(pause_s):
    d = detector(max_audio_s=2.0)
    tail = np.concatenate([voice(1), silence(pause_s), voice(1), silence(0.8)])
    events = feed(d, np.concatenate([voice(2), tail, voice(1), silence(1)]))
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded, SpeechStarted, UtteranceEnded]
    (_, _), (cut, _), (_, _), (after, _) = events
    assert cut.truncated and not after.truncated  # the tail was no question; the speech after its silence is
    assert after.start_s == pytest.approx(2 + tail.size / RATE, abs=WINDOW / RATE)


def test_muted_audio_is_never_a_question():
    d = detector()
    d.mute()
    assert d.muted
    assert feed(d, np.concatenate([voice(1), silence(1)])) == []
    d.unmute()
    assert not d.muted
    assert [type(e) for e, _ in feed(d, np.concatenate([voice(1), silence(1)]))] == [SpeechStarted, UtteranceEnded]


def test_mute_for_a_while_expires_by_stream_time():
    d = detector()
    d.mute(for_s=1.5)  # the app's own answer is 1.5 s long
    events = feed(d, np.concatenate([voice(1), silence(1), voice(1), silence(1)]))
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded]
    assert events[0][0].at_s == pytest.approx(2.0, abs=0.04)  # stream time still counts while muted
    assert events[1][0].audio.size / RATE == pytest.approx(1.0 + 2 * 0.3, abs=0.07)  # the right audio


def test_mute_drops_an_utterance_in_progress():
    d = detector()
    assert [type(e) for e, _ in feed(d, voice(1))] == [SpeechStarted]
    d.mute()
    d.unmute()
    assert feed(d, silence(1.5)) == []


def test_reset_forgets_unmutes_and_restarts_the_clock():
    d = detector()
    feed(d, np.concatenate([silence(2), voice(1)]))
    d.mute()
    d.reset()
    assert not d.muted
    events = feed(d, np.concatenate([voice(1), silence(1)]))
    assert events[0][0].at_s == 0.0 and events[1][0].end_s == pytest.approx(1.0, abs=0.04)


def test_sessions_do_not_share_state():
    vad = LoudnessVad()
    a, b = TurnDetector(vad), TurnDetector(vad)
    feed(a, voice(1))
    assert feed(b, silence(1)) == []
    assert [type(e) for e, _ in feed(a, silence(1))] == [UtteranceEnded]


def test_utterance_audio_is_the_speech_itself():
    marked = np.concatenate([silence(1), voice(1) * 0.5, voice(0.5), silence(1)])  # two loudness levels
    (_, _), (end, _) = feed(detector(speech_pad_ms=0), marked)
    assert end.audio.size / RATE == pytest.approx(1.5, abs=0.04)
    assert np.abs(end.audio[: RATE // 2]).max() == pytest.approx(0.25, abs=0.01)
    assert np.abs(end.audio[-RATE // 4 :]).max() == pytest.approx(0.5, abs=0.01)


class LevelVad:
    """Speech probability = the window's loudness (0.9 voice, 0.4 murmur, 0 silence)."""

    def initial_state(self):
        return 0

    def __call__(self, windows, state):
        return np.abs(windows).max(axis=1).astype(np.float32), state


def test_a_probability_between_the_two_thresholds_neither_starts_nor_ends_speech():
    """As faster-whisper's get_speech_timestamps: speech ends below threshold - 0.15 (0.35), not below 0.5."""
    d = TurnDetector(LevelVad(), SpeechConfig(speech_pad_ms=0))
    murmur = np.full(RATE, 0.4, np.float32)
    events = feed(d, np.concatenate([murmur, voice(1) / 0.5 * 0.9, murmur, silence(1)]))
    assert [type(e) for e, _ in events] == [SpeechStarted, UtteranceEnded]
    assert events[0][0].at_s == pytest.approx(1.0, abs=0.04)  # the murmur before started nothing
    assert events[1][0].end_s == pytest.approx(3.0, abs=0.04)  # the murmur after went on with the speech


def test_the_silence_of_a_pause_counts_only_the_windows_the_vad_has_judged():
    d = TurnDetector(LoudnessVad(), SpeechConfig(), end_silence_ms=1000, pause_ms=200)
    [pause] = [e for e, _ in feed(d, np.concatenate([voice(1.0), silence(0.3)])) if isinstance(e, Paused)]
    before = d.silence_s(pause.end_s)
    assert before is not None and round(before * RATE) % WINDOW == 0  # whole windows
    d.feed(RATE, silence(0.005))  # 80 samples: not yet a window the VAD has heard (they may be speech)
    assert d.silence_s(pause.end_s) == before


def test_speaking_says_when_the_question_began_and_how_long_it_has_gone_on():
    d = detector()
    feed(d, silence(1.0))
    assert d.speaking() is None
    feed(d, voice(1.0))
    start, so_far = d.speaking()
    assert start == pytest.approx(1.0, abs=0.04) and so_far == pytest.approx(1.0, abs=0.04)
    feed(d, silence(0.2))
    assert d.speaking() is None  # in a pause


def test_the_first_sound_of_speech_is_an_onset_when_asked_for():
    audio = np.concatenate([silence(1.0), voice(0.6), silence(1.0)])
    with_onsets = TurnDetector(LoudnessVad(), SpeechConfig(speech_pad_ms=300), onsets=True)
    events = [e for e, _ in feed(with_onsets, audio)]
    assert [type(e) for e in events] == [SpeechOnset, SpeechStarted, UtteranceEnded]
    assert events[0].at_s == pytest.approx(1.0, abs=0.04) == events[1].at_s
    assert [type(e) for e, _ in feed(detector(), audio)] == [SpeechStarted, UtteranceEnded]


def test_a_pause_gives_its_audio_and_can_be_made_the_end():
    d = TurnDetector(LoudnessVad(), SpeechConfig(speech_pad_ms=0), end_silence_ms=1000, pause_ms=200)
    [pause] = [e for e, _ in feed(d, np.concatenate([silence(0.5), voice(1.0), silence(0.3)])) if isinstance(e, Paused)]
    heard = d.pause_audio(pause.end_s)
    assert heard.size / RATE == pytest.approx(0.3, abs=0.04) and not heard.any()  # the pause's own silence
    ended = d.end_now(pause.end_s)
    assert not ended.truncated and (ended.start_s, ended.end_s) == (pause.start_s, pause.end_s)
    assert ended.audio.size / RATE == pytest.approx(1.0, abs=0.04) and d.pause_audio(pause.end_s) is None


def test_where_the_sound_stopped_before_a_pause_the_vad_heard_late():
    d = TurnDetector(LateEndVad(), SpeechConfig(), end_silence_ms=1000, pause_ms=200)
    [pause] = [e for e, _ in feed(d, np.concatenate([room(0.512), voice(1.024), room(0.3)]))
               if isinstance(e, Paused)]
    assert pause.end_s == pytest.approx(1.536 + 0.064)  # the VAD's end: late
    assert d.sound_end_s(pause.end_s, lead_s=0.096, rise_db=6.0) == pytest.approx(1.536)  # where the voice stopped
    # no further back than asked
    assert d.sound_end_s(pause.end_s, lead_s=0.032, rise_db=6.0) == pytest.approx(1.6 - 0.032)
    feed(d, voice(0.1))
    assert d.sound_end_s(pause.end_s, lead_s=0.096, rise_db=6.0) is None  # the speech went on
    first = TurnDetector(LoudnessVad(), SpeechConfig(speech_pad_ms=0, min_speech_ms=0), pause_ms=64)
    [pause] = [e for e in first.feed(RATE, np.concatenate([voice(0.032), silence(0.2)])) if isinstance(e, Paused)]
    # only 32 ms of sound were kept
    assert first.sound_end_s(pause.end_s, lead_s=0.096, rise_db=6.0) == pytest.approx(0.032)


def test_the_audio_kept_between_questions_is_bounded_and_is_the_right_audio():
    d = detector()
    hum = (0.05 * np.random.default_rng(0).uniform(-1, 1, 30 * RATE)).astype(np.float32)  # no speech, no two alike
    feed(d, hum)
    kept = sum(a.size for a in d._s.audio) / RATE
    assert kept <= 0.3 + 0.1  # the lead-in (speech_pad_ms) and a chunk, not 30 s
    fed = np.concatenate([hum, voice(1.0)])
    feed(d, fed[hum.size:])
    start = round(d.speaking()[0] * RATE)
    assert np.array_equal(d.speech_so_far(), fed[start - round(0.3 * RATE):])  # lead-in and speech, in order


@pytest.mark.parametrize("pause_ms, ok", [(31, False), (32, True), (699, True), (700, False)])
def test_a_pause_must_be_a_window_or_more_and_shorter_than_the_end_silence(pause_ms, ok):
    if ok:
        TurnDetector(LoudnessVad(), SpeechConfig(), end_silence_ms=700, pause_ms=pause_ms)
    else:
        with pytest.raises(ValueError, match=r"pause_ms must be 0 \(off\) or in 32\.\.699"):
            TurnDetector(LoudnessVad(), SpeechConfig(), end_silence_ms=700, pause_ms=pause_ms)
