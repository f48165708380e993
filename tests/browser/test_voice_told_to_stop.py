"""Saying "Stop." over the spoken answer, in Chromium: the fake microphone asks QUESTION, then says "Stop." while
its long answer sounds; the real Whisper tiny.en hears it, the answer's sound is dropped, nothing more plays and
nothing is asked of the model (fastvlm/speech/intent.py, docs/voice.md)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from fastvlm.bench.browser.serve import another_chromium
from tests.browser.conftest import write_y4m
from tests.browser.pages import toasts, wait_for_text, wait_until
from tests.browser.test_voice_tab import first_answer_playing, open_voice_tab, voice_server_parts  # noqa: F401
from tests.browser.test_voice_tab import write_question

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def stop_browser(browser, tmp_path_factory):
    """Chromium whose fake microphone says QUESTION, waits 11 s (its answer sounds then: it begins 3-8 s after
    the question), says "Stop.", then is quiet for 25 s."""
    from fastvlm.speech.audio import read_wav, write_wav
    from fastvlm.speech.espeak import find_backend

    folder = tmp_path_factory.mktemp("stop")
    rate, first = read_wav(write_question(folder / "first.wav", lead_s=0.5, tail_s=11.0))
    find_backend().write("Stop.", "en-us", 160, folder / "stop.wav")
    stop_rate, stop = read_wav(folder / "stop.wav")
    assert stop_rate == rate, (stop_rate, rate)
    write_wav(folder / "both.wav", rate, np.concatenate([first, stop, np.zeros(rate * 25, np.int16)]))
    chromium = another_chromium(browser, write_y4m(folder / "camera.y4m"), folder / "both.wav")
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def stop_server(voice_server_parts):  # noqa: F811
    yield voice_server_parts(voice_max_new_tokens=200)  # a long answer: still spoken when "Stop." is said


def test_saying_stop_over_the_answer_stops_it_and_asks_nothing(stop_browser, stop_server):
    context, page = open_voice_tab(stop_browser, stop_server)
    try:
        first = first_answer_playing(page)
        transcript = page.locator("#voice-transcript textarea").input_value
        wait_for_text(page, transcript, lambda t: "stop" in t.lower(), 30, "“Stop.” in the transcript", 0.1)
        line = page.evaluate("() => window.__fvLink")
        assert [h for h in line["hushes"] if h["at"] > first and h["stopped"] > 0], line["hushes"]  # dropped
        time.sleep(3)  # what would come: the answer going on, or one to "Stop."
        after = page.evaluate("() => window.__fvLink")
        assert after["plays"] == line["plays"] and after["asks"] == line["asks"], (line, after)  # (plays: when
        # each sentence sent was to start, some after the drop, which stopped those too)
        assert "Nothing asked" not in toasts(page)
        wait_until(lambda: "Listening" in page.locator(".voice-status").inner_text(), 5, every=0.1,
                   what="the status back to listening")
    finally:
        context.close()
