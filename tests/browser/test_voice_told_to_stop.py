"""Saying "Stop." or "Say that again?" over the spoken answer, in Chromium: the fake microphone asks QUESTION, then
says one of them while its long answer sounds; the real Whisper tiny.en hears it. "Stop.": the answer's sound is
dropped, nothing more plays and nothing is asked of the model; "Say that again?": its sound is dropped and it
plays again (fastvlm/speech/intent.py, docs/voice.md)."""

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


def said_over(browser, folder, words: str):
    """Chromium whose fake microphone says QUESTION, waits 11 s (its answer sounds then: it begins 3-8 s after
    the question), says `words`, then is quiet for 25 s."""
    from fastvlm.speech.audio import read_wav, write_wav
    from fastvlm.speech.espeak import find_backend

    rate, first = read_wav(write_question(folder / "first.wav", lead_s=0.5, tail_s=11.0))
    find_backend().write(words, "en-us", 160, folder / "words.wav")
    words_rate, said = read_wav(folder / "words.wav")
    assert words_rate == rate, (words_rate, rate)
    write_wav(folder / "both.wav", rate, np.concatenate([first, said, np.zeros(rate * 25, np.int16)]))
    return another_chromium(browser, write_y4m(folder / "camera.y4m"), folder / "both.wav")


@pytest.fixture(scope="module")
def stop_browser(browser, tmp_path_factory):
    chromium = said_over(browser, tmp_path_factory.mktemp("stop"), "Stop.")
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def again_browser(browser, tmp_path_factory):
    chromium = said_over(browser, tmp_path_factory.mktemp("again"), "Say that again?")
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


def test_asking_for_it_again_over_the_answer_drops_its_sound_and_plays_it_again(again_browser, stop_server):
    context, page = open_voice_tab(again_browser, stop_server)
    try:
        first = first_answer_playing(page)
        answer = page.locator("#voice-answer textarea").input_value
        shown = answer()
        transcript = page.locator("#voice-transcript textarea").input_value
        wait_for_text(page, transcript, lambda t: "again" in t.lower(), 30, "“Say that again” in the transcript", 0.1)
        hushed = wait_until(lambda: [h["at"] for h in page.evaluate("() => window.__fvLink.hushes")
                                     if h["at"] > first and h["stopped"] > 0], 5, every=0.1, what="its sound dropped")
        again = wait_until(lambda: [p for p in page.evaluate("() => window.__fvLink.plays") if p > hushed[0]], 15,
                           every=0.1, what="the answer playing again")
        assert again and "Nothing asked" not in toasts(page)
        assert shown.strip() and answer().startswith(shown), (shown, answer())  # the same answer, not a new one
    finally:
        context.close()
