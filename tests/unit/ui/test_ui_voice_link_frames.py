"""One voice line's own rules without a socket (the WebSocket route: test_ui_voice_link.py): the page's hello and
the capture rates it may say, each frame's size and pace at their limits, the close codes the page is given, what
a closed line sends, and how a frame is heard (its own length to wait for a verdict, the prepare in a daemon)."""

import threading

import pytest

from fastvlm.speech import SpeechOnset
from tests.unit.ui.test_ui_voice import SETTINGS
from tests.unit.ui.test_ui_voice_listening import listening
from ui.voice.link import (BAD_FRAME, BUSY, NO_HELLO, REPLACED, TOO_BIG, TOO_FAST, UNKNOWN, LinkLimits, VoiceLink,
                           crowded)

LIMITS = LinkLimits(max_frame_s=1.0, ahead_s=5.0)


def line(sent=None, **kwargs) -> VoiceLink:
    session, _ = listening()
    return VoiceLink(session, SETTINGS, (sent if sent is not None else []).append, **kwargs)


def frame(seconds: float, rate: int = 16_000) -> bytes:
    return bytes(2 * round(seconds * rate))


@pytest.mark.parametrize("rate", [8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000])
def test_every_rate_a_browser_captures_at_is_accepted(rate):
    link = line()
    assert link.hello({"type": "hello", "rate": rate}) is None and link.rate == rate


@pytest.mark.parametrize("rate", [8_001, 16_001, 44_101, 0, "fast"])
def test_any_other_rate_closes_the_line(rate):
    assert line().hello({"rate": rate}) == BAD_FRAME


def test_a_hello_without_a_rate_and_a_line_without_a_hello_hear_at_16_khz():
    link = line()
    assert link.rate == 16_000
    link.hear(frame(1.0))
    assert link.session.heard_s == 1.0
    assert link.hello({"type": "hello"}) is None and link.rate == 16_000


def test_the_close_codes_say_what_rfc_6455_means_by_them():
    assert BAD_FRAME[0] == 1003  # unsupported data
    assert NO_HELLO[0] == TOO_FAST[0] == 1008  # policy violation
    assert TOO_BIG[0] == 1009  # message too big
    assert BUSY[0] == 1013  # try again later
    assert (UNKNOWN[0], REPLACED[0], crowded(3)[0]) == (4404, 4000, 4429)  # private: as HTTP's 404 and 429


def test_a_frame_of_max_frame_s_is_heard_and_a_sample_more_is_too_big():
    link = line()
    assert link.check(frame(1.0), LIMITS, now=link.opened) is None
    assert link.check(frame(1.0) + bytes(2), LIMITS, now=link.opened + 10) == TOO_BIG


def test_a_frame_is_timed_by_its_own_rate():
    link = line()
    link.hello({"rate": 8_000})
    assert link.check(frame(1.0, 8_000), LIMITS, now=link.opened) is None and link.heard_s == 1.0


def test_audio_may_run_ahead_s_ahead_of_the_clock_since_the_line_opened_and_no_further():
    link = line()
    link.opened = 0.0  # a clock read as 0 when it opened: `opened + 0.04 - opened` is then exactly 0.04, whatever
    # the machine's uptime (at a monotonic clock of ~64 000 s it came out a hair under, and 5.04 s was too fast)
    for _ in range(5):  # 5 s at once, the moment it opened
        assert link.check(frame(1.0), LIMITS, now=link.opened) is None
    assert link.check(frame(0.04), LIMITS, now=link.opened) == TOO_FAST
    assert link.check(frame(0.04), LIMITS, now=link.opened + 0.04) is None  # real time goes on
    link = line()
    link.opened -= 1.0  # opened a second ago; no `now`: the monotonic clock
    assert all(link.check(frame(1.0), LIMITS) is None for _ in range(6))


def test_a_closed_line_sends_nothing_and_says_so():
    sent = []
    link = line(sent)
    link.close()
    link.hush(3)
    link.hold(True)
    assert link.say(None, 3) is False and sent == []


def test_a_frame_waits_at_most_its_own_length_for_a_verdict():
    link = line()
    link.hear(frame(0.04))
    assert link.session.taker.settled == [pytest.approx(0.04)]


def test_the_frame_of_a_question_is_prepared_in_a_thread_that_cannot_hold_the_app_open():
    ran = threading.Event()
    daemon = []

    def prepare(session, start_s, words=""):
        daemon.append(threading.current_thread().daemon)
        ran.set()

    link = line(prepare=prepare)
    link.session.taker.next = [SpeechOnset(0.0)]
    link.hear(frame(0.04))
    assert ran.wait(5) and daemon == [True]
