"""The echo walk's room needs PulseAudio's tools, and its server only when none (PulseAudio's or PipeWire's) runs."""

from __future__ import annotations

import pytest

from fastvlm.bench.browser import echo


@pytest.mark.parametrize("installed, running, missing", [
    (set(), False, "pulseaudio, pactl, paplay"),
    ({"pactl", "paplay"}, False, "pulseaudio"),  # nothing runs and nothing can start a server
    ({"pactl", "paplay"}, True, None),  # a server runs (PipeWire's pulse, say): no pulseaudio binary needed
    ({"pulseaudio", "pactl"}, True, "paplay"),
    ({"pulseaudio", "pactl", "paplay"}, False, None),
])
def test_the_room_says_which_tool_is_missing_and_how_to_install_it(monkeypatch, installed, running, missing):
    monkeypatch.setattr(echo.shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool in installed else None)
    monkeypatch.setattr(echo, "_running", lambda: running)
    if missing is None:
        echo.check()
        return
    with pytest.raises(echo.RoomUnavailable) as e:
        echo.check()
    assert f"({missing} not found)" in str(e.value) and echo.INSTALL in str(e.value)


class Clock:
    """time.time() and time.sleep() of the walk: sleeping moves the clock."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_room_barge_in_walk_times_each_question_over_an_answer_and_pairs_it_with_its_transcript(monkeypatch):
    from contextlib import contextmanager
    from pathlib import Path
    from types import SimpleNamespace

    clock, played = Clock(1000.0), []
    rec = {"plays": [1001.0, 1004.5, 1008.0],  # the three answers' first sounds (the page's wall clock)
           "log": [(1002.0, "transcript", "What am I holding?"), (1005.8, "transcript", "What color is it?"),
                   (1009.5, "transcript", "Where is the red cup?")]}
    holds = [{"at": 1_003_500.0, "sounding": 1, "resumed": None}, {"at": 1_007_000.0, "sounding": 1, "resumed": None}]
    page = SimpleNamespace(evaluate=lambda script: [[], holds])

    @contextmanager
    def hands_free(browser, url, cancel_echo=True):
        yield page, True

    monkeypatch.setattr(echo, "time", clock)
    monkeypatch.setattr(echo, "_hands_free", hands_free)
    monkeypatch.setattr(echo.pg, "recorded", lambda p: rec)
    monkeypatch.setattr(echo.subprocess, "Popen", lambda cmd: played.append((clock.now, cmd[-1])) or
                        SimpleNamespace(wait=lambda timeout: 0))
    questions = [("What am I holding?", Path("q0.wav")), ("What color is it?", Path("q1.wav")),
                 ("Where is the cup?", Path("q2.wav"))]
    out = echo.barge_in(None, "http://x", questions, after_s=2.0)
    assert played == [(1000.0, "q0.wav"), (1003.0, "q1.wav"), (1006.5, "q2.wav")]  # 2 s into each answer's sound
    assert [round(r["stop_s"], 3) for r in out["runs"]] == [0.2, 0.2]  # from the speech: started + LEAD_S (0.3 s)
    assert out["questions"] == out["stopped"] == 2
    assert [h["transcript"] for h in out["heard"]] == ["What color is it?", "Where is the red cup?"]
    assert out["wer"] == 1 / 8  # "red" inserted, over the 8 words asked over the answers
    clock.now, rec["plays"], played[:] = 1000.0, [1001.0], []  # no answer comes to the second question
    out = echo.barge_in(None, "http://x", questions, after_s=2.0)
    assert played[1][0] == 1003.0 and played[2][0] == pytest.approx(1003.0 + 8 + 2, abs=0.06)  # ANSWER_WAIT_S, 2 s
    assert out["stopped"] == 1  # the last transcript shown before the third question began is the second's:
    assert [h["transcript"] for h in out["heard"]] == ["Where is the red cup?", ""]


def test_each_question_gets_the_last_transcript_shown_before_the_next_one_began():
    shown = [(1.0, "What am"), (2.0, "What am I holding?"), (7.0, "usual on the table.")]
    assert echo.heard_per_question(shown, [0.5, 5.0, 6.5]) == ["What am I holding?", "", "usual on the table."]
    assert echo.heard_per_question([], [0.5]) == [""]
