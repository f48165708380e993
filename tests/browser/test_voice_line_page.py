"""The page's side of the voice line (ui/voice/link.js) against a scripted server: Playwright answers the page's
WebSocket itself (`route_web_socket`), so each test sends exactly the messages and sound it means and watches what
the page does with them: which sounds start when (in the player's own clock), which end early, what goes back.
No app, no model: a few seconds a test. The whole tab, with the real server, is test_voice_tab.py."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from fastvlm.bench.browser.serve import another_chromium
from fastvlm.speech.audio import to_int16, write_wav
from tests.browser.conftest import write_y4m
from tests.browser.pages import wait_until
from tests.unit.speech.test_speech_audio import tone

pytestmark = pytest.mark.browser

ORIGIN = "http://localhost:8765"  # localhost: a secure context (microphone, audio worklet); never really served
RATE = 16_000
# Every sound the page makes: when it was scheduled (player clock, s), its length and peak (full scale 1), when it
# ended (wall ms); and every gain node of a 16 kHz context (the capture's), with its value.
WATCH = """
window.__sounds = []; window.__players = []; window.__captureGains = [];
const createSource = AudioContext.prototype.createBufferSource;
AudioContext.prototype.createBufferSource = function () {
  const src = createSource.call(this), player = this, sound = {when: null, duration: null, peak: null, ended: null};
  if (!window.__players.includes(player)) window.__players.push(player);
  window.__sounds.push(sound);
  const start = src.start;
  src.start = function (when) {
    sound.when = when;
    sound.duration = this.buffer.duration;
    sound.peak = this.buffer.getChannelData(0).reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    return start.apply(this, arguments);
  };
  src.addEventListener('ended', () => { sound.ended = performance.timeOrigin + performance.now(); });
  return src;
};
const createGain = AudioContext.prototype.createGain;
AudioContext.prototype.createGain = function () {
  const gain = createGain.call(this);
  if (this.sampleRate === 16000) window.__captureGains.push(gain.gain);
  return gain;
};
"""


def page_html() -> str:
    from ui import AppSettings
    from ui.voice.capture import capture_head

    counter = "onclick=\"window.__clicks.push(this.id)\""
    return (f"<html><head><script>window.__clicks = [];</script>{capture_head(AppSettings())}</head><body>"
            f"<button id=voice-heard-start {counter}></button><button id=voice-heard-end {counter}></button>"
            "</body></html>")


def pcm(seconds: float, level: float = 8000 / 32768) -> np.ndarray:
    """A 440 Hz tone at `level` of full scale, as 16-bit samples at RATE."""
    return to_int16(tone(440, RATE, seconds, level))


class Line:
    """One page with the line open (`fastvlmVoice.start`), and the server's end of it: what the page sent, in order."""

    def __init__(self, chromium, *scripts: str):
        self.context = chromium.new_context(permissions=["microphone"])
        for script in (WATCH, *scripts):
            self.context.add_init_script(script)
        self.page = self.context.new_page()
        self.sockets, self.received, self.closes = [], [], []
        self.page.route(ORIGIN + "/", lambda route: route.fulfill(body=page_html(), content_type="text/html"))
        self.page.route_web_socket(ORIGIN.replace("http", "ws") + "/voice/link", self._accept)
        self.page.goto(ORIGIN + "/")
        self.start()

    def _accept(self, ws) -> None:
        self.sockets.append(ws)
        ws.on_message(lambda message: self.received.append(message))
        ws.on_close(lambda code, reason: self.closes.append(code))

    def start(self) -> None:
        assert self.page.evaluate("window.fastvlmVoice.start('key').then(() => '', (e) => String(e))") == ""

    def send(self, message) -> None:
        self.sockets[-1].send(message if isinstance(message, bytes) else json.dumps(message))

    def say(self, turn: int, part: int, seconds: float) -> None:
        """A piece of a spoken sentence: 16-bit PCM (a 440 Hz tone) behind the line's header."""
        self.send(struct.pack("<III", turn, RATE, part) + pcm(seconds).astype("<i2").tobytes())

    def sounds(self, n: int | None = None) -> list[dict]:
        """The sounds the page made (at least `n`, waited for)."""
        if n is None:
            return self.page.evaluate("window.__sounds")
        return wait_until(lambda: len(s := self.page.evaluate("window.__sounds")) >= n and s, 5,
                          what=f"{n} sounds started")

    def all_ended(self) -> list[dict] | None:
        sounds = self.sounds()
        return sounds if all(s["ended"] for s in sounds) else None

    def frames(self) -> list[bytes]:
        """The microphone frames the page sent so far (what the server got is taken in while Playwright waits)."""
        self.page.wait_for_timeout(50)
        return [m for m in self.received if isinstance(m, bytes)]

    def closed_codes(self) -> list[int]:
        """The close codes of the lines the page closed, so far."""
        self.page.wait_for_timeout(50)
        return self.closes

    def link(self) -> dict:
        return self.page.evaluate("window.__fvLink")

    def player_state(self) -> str:
        return self.page.evaluate("window.__players[0].state")

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def line(browser):
    opened = Line(browser)
    yield opened
    opened.close()


def test_a_sentences_pieces_play_on_from_each_other_and_the_next_sentence_after_the_gap(line, tmp_path):
    from ui import AppSettings

    gap = AppSettings().voice_sentence_gap_s
    line.say(1, 0, 0.5)
    line.say(1, 1, 0.25)
    write_wav(tmp_path / "sentence.wav", RATE, pcm(0.4))  # an encoded sentence (rate 0): the page decodes it
    line.send(struct.pack("<III", 1, 0, 0) + (tmp_path / "sentence.wav").read_bytes())
    first, piece, encoded = line.sounds(3)
    assert piece["when"] == pytest.approx(first["when"] + 0.5, abs=1e-6), (first, piece)  # no gap, no overlap
    assert encoded["when"] == pytest.approx(piece["when"] + 0.25 + gap, abs=1e-6), (piece, encoded, gap)
    assert encoded["duration"] == pytest.approx(0.4, abs=0.01)
    assert first["peak"] == pytest.approx(8000 / 32768, rel=0.01), first  # as loud as it was sent
    wait_until(lambda: line.sounds()[2]["ended"], 5, what="the last sentence played to its end")
    told = [json.loads(m) for m in line.received if isinstance(m, str)]
    assert told == [{"type": "hello", "token": "key", "rate": RATE}, {"type": "sounding", "turn": 1}], told
    assert line.link()["parts"] == 1 and line.link()["late"] == 0


def test_the_bench_recorder_takes_an_answers_first_sentence_as_its_sound_not_the_ones_after(browser):
    """The browser journeys time a question to its answer's first sound: a long answer's later sentences (which
    may start after the next question began) are not an answer's start."""
    from fastvlm.bench.browser.page import RECORDER

    line = Line(browser, RECORDER)
    try:
        line.say(1, 0, 0.3)
        line.say(1, 0, 0.3)  # the same answer's second sentence
        line.say(2, 0, 0.3)  # the next answer
        first, _, next_answer = line.sounds(3)
        wait_until(lambda: len(line.page.evaluate("window.__fv.plays")) >= 2, 5, what="two answers' sounds recorded")
        line.page.wait_for_timeout(200)  # the page schedules each sentence as it arrives: all three are by now
        plays = line.page.evaluate("window.__fv.plays")
        assert len(plays) == 2, plays
        # wall-clock estimates from the player's coarse clock: tens of ms off, the second sentence was 0.45 s earlier
        assert plays[1] - plays[0] == pytest.approx(1000 * (next_answer["when"] - first["when"]), abs=100), plays
    finally:
        line.close()


def hushed(line: Line, turn: int) -> float:
    """Send a hush of the turns before `turn`; when the page took it (wall ms)."""
    line.send({"type": "hush", "turn": turn})
    return wait_until(lambda: (h := line.link()["hushes"]) and h[-1]["at"], 5, what="the hush taken")


def test_a_hush_stops_every_sound_at_once_and_drops_what_comes_late_for_its_turns(line):
    line.say(1, 0, 1.0)
    line.say(1, 0, 2.0)  # a second sentence, waiting its turn
    line.sounds(2)
    wait_until(lambda: line.link()["sounding"], 5, what="the first sentence sounding")
    at = hushed(line, 2)
    ended = wait_until(line.all_ended, 5, what="both sounds ended")
    assert all(s["ended"] - at < 300 for s in ended), (at, ended)  # within 0.3 s of the hush, not at their ends
    line.say(1, 1, 0.5)  # the hushed turn's sound still on its way: never played
    line.say(2, 0, 0.3)  # the next turn's: played, at once, to its end
    new = line.sounds(3)[2]
    assert len(line.sounds()) == 3, line.sounds()
    wait_until(lambda: line.sounds()[2]["ended"], 5, what="the next turn's sentence played to its end")
    assert new["duration"] == pytest.approx(0.3, abs=0.01)


def test_speech_over_the_answer_holds_its_sound_which_then_plays_on_or_is_dropped(line):
    line.say(1, 0, 1.0)
    line.sounds(1)
    line.send({"type": "pause"})
    wait_until(lambda: line.player_state() == "suspended", 5, what="the answer held")
    line.page.wait_for_timeout(1500)  # longer than the sentence: held, it has not ended
    assert not line.sounds()[0]["ended"] and line.link()["holds"][0]["resumed"] is None
    line.send({"type": "resume"})
    wait_until(lambda: line.sounds()[0]["ended"], 5, what="the held sentence played on to its end")
    assert line.player_state() == "running" and line.link()["holds"][0]["resumed"]
    line.say(1, 0, 2.0)
    line.sounds(2)
    line.send({"type": "pause"})
    wait_until(lambda: line.player_state() == "suspended", 5, what="the answer held again")
    hushed(line, 2)  # the speech over it was a question: the held sound is dropped, the next answer plays
    wait_until(lambda: line.sounds()[1]["ended"], 5, what="the held sentence stopped")
    line.say(2, 0, 0.3)
    wait_until(lambda: len(s := line.sounds()) == 3 and s[2]["ended"], 5, what="the next answer played to its end")


def test_the_servers_start_and_ask_press_the_pages_hidden_buttons(line):
    line.send({"type": "start"})
    line.send({"type": "ask"})
    assert wait_until(lambda: len(c := line.page.evaluate("window.__clicks")) == 2 and c, 5,
                      what="two clicks") == ["voice-heard-start", "voice-heard-end"]


def test_the_microphone_goes_out_as_16_bit_frames_at_its_level_and_never_to_the_speakers(browser, tmp_path):
    write_wav(tmp_path / "tone.wav", RATE, pcm(10.0, level=0.5))  # the fake microphone: half of full scale
    chromium = another_chromium(browser, write_y4m(tmp_path / "camera.y4m"), tmp_path / "tone.wav")
    line = Line(chromium)
    try:
        frames = wait_until(lambda: len(f := line.frames()) >= 25 and f, 10, what="a second of microphone frames")
        assert {len(f) for f in frames} == {RATE * 40 // 1000 * 2}, {len(f) for f in frames}  # 40 ms, 16-bit
        peak = max(int(np.abs(np.frombuffer(f, "<i2").astype(np.int32)).max()) for f in frames)
        assert 0.9 * 16384 < peak < 1.1 * 16384, peak
        assert line.page.evaluate("window.__captureGains.map((g) => g.value)") == [0]
    finally:
        line.close()
        chromium.close()


def test_the_line_lets_go_of_the_microphone_when_stopped_closed_or_started_again(line):
    track = "window.__fvCapture.readyState"
    line.start()  # started again: the first line is closed by the page
    wait_until(lambda: line.closed_codes() == [1000], 5, what="the first line closed")
    assert line.link()["state"] == "on" and line.page.evaluate(track) == "live"
    line.page.evaluate("window.fastvlmVoice.stop()")
    wait_until(lambda: line.closed_codes() == [1000, 1000], 5, what="the line closed by Stop")
    assert line.link()["state"] == "off" and line.page.evaluate(track) == "ended"
    line.start()
    line.sockets[-1].close(code=4000, reason="opened again elsewhere")  # the server closes it
    wait_until(lambda: line.link()["state"] == "off", 5, what="the page to take the line as closed")
    assert line.link()["closed"] == {"code": 4000, "reason": "opened again elsewhere"}
    assert line.page.evaluate(track) == "ended"
