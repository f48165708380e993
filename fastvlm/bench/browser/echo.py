"""Does the answer's own voice set off barge-in? The page's speaker looped straight into its microphone.

`bench --journeys --browser --echo N`: a PulseAudio null sink is the default speaker and its monitor the default
microphone (`Room`), so every answer the page plays reaches its microphone at full level (harsher than a laptop's
speaker and microphone, which lose some of it on the way) and only the browser's echo cancellation keeps it out.
The questions are played into the same sink by `paplay`, outside Chromium, so they are not in the canceller's
reference: they are heard as a person. Chromium runs without fake devices (the microphone is the real default
source); its camera is a canvas (`CANVAS_CAMERA`). Per answer: the stops barge-in made while it played with
nobody speaking (`window.__fvLink.hushes`) and the questions the page heard meanwhile. A control walk turns the
canceller off in the page (the same server) and shows the loop does reach the microphone.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from ...speech.stt import pooled_word_error_rate
from . import media, walks
from . import page as pg
from ..acoustics import AcousticPath, RoomModel
from .serve import CHROMIUM

SINK, SOURCE = "fastvlm-room", "fastvlm-room-mic"
SPEAKER = "fastvlm-room-speaker"  # with `--echo-room`: the page plays here, and reaches SINK through the room
INSTALL = "apt-get install pulseaudio pulseaudio-utils"
LEAD_S = 0.3  # silence before each question in its file
ANSWER_WAIT_S = 8.0  # the room's barge-in walk waits this long for a question's answer to sound, then goes on
# The voice tab opens the webcam; with no fake devices the camera is a canvas, and the echo control can turn the
# canceller off under the app's own constraints (`window.__fvEcho`, read at every getUserMedia).
CANVAS_CAMERA = r"""(() => {
  const md = navigator.mediaDevices, open = md.getUserMedia.bind(md), list = md.enumerateDevices.bind(md);
  md.enumerateDevices = async () => [...await list(), {deviceId: 'canvas', kind: 'videoinput', label: 'canvas',
                                                       groupId: 'canvas', toJSON() { return this; }}];
  md.getUserMedia = async (c) => {
    if (c && c.audio && window.__fvEcho === false) c = {...c, audio: {...c.audio, echoCancellation: false}};
    if (!c || !c.video) return open(c);
    const canvas = Object.assign(document.createElement('canvas'), {width: 640, height: 480});
    const g = canvas.getContext('2d');
    let i = 0;
    setInterval(() => { g.fillStyle = `hsl(${(i++ * 7) % 360},60%,50%)`; g.fillRect(0, 0, 640, 480); }, 100);
    const tracks = canvas.captureStream(10).getVideoTracks();
    if (c.audio) tracks.push(...(await open({audio: c.audio})).getAudioTracks());
    return new MediaStream(tracks);
  };
})();"""


class RoomUnavailable(RuntimeError):
    """PulseAudio or its tools are missing, or its server would not start."""


def _pactl(*args: str) -> str:
    return subprocess.run(["pactl", *args], check=True, capture_output=True, text=True, timeout=10).stdout.strip()


def _running() -> bool:
    """A PulseAudio server (or PipeWire's) answers."""
    return subprocess.run(["pactl", "info"], capture_output=True, timeout=10, check=False).returncode == 0


def check() -> None:
    """Raise `RoomUnavailable` (with the install line) unless PulseAudio's tools are installed, and its server
    is running or can be started."""
    need = ("pactl", "paplay") if shutil.which("pactl") and _running() else ("pulseaudio", "pactl", "paplay")
    missing = [tool for tool in need if shutil.which(tool) is None]
    if missing:
        raise RoomUnavailable(f"--echo needs PulseAudio ({', '.join(missing)} not found): {INSTALL}")


@contextmanager
def room(acoustic: RoomModel | None = None):
    """A PulseAudio sink whose monitor is the default microphone (a server is started if none runs). With
    `acoustic`, the page plays into a sink of its own (`SPEAKER`) and reaches that microphone through
    `acoustics.AcousticPath` (a loudspeaker in a room) instead of straight."""
    check()
    started = not _running()
    if started:
        subprocess.run(["pulseaudio", "--daemonize=yes", "--exit-idle-time=-1"], check=True, timeout=20)
    path = None
    try:
        modules = [_pactl("load-module", "module-null-sink", f"sink_name={SINK}"),
                   _pactl("load-module", "module-remap-source", f"master={SINK}.monitor", f"source_name={SOURCE}")]
        if acoustic is not None:
            modules.append(_pactl("load-module", "module-null-sink", f"sink_name={SPEAKER}"))
        defaults = _pactl("get-default-sink"), _pactl("get-default-source")
        _pactl("set-default-sink", SINK if acoustic is None else SPEAKER)
        _pactl("set-default-source", SOURCE)
        if acoustic is not None:
            path = AcousticPath(f"{SPEAKER}.monitor", SINK, acoustic)
        try:
            yield SINK
        finally:
            if path is not None:
                path.close()
            for kind, name in zip(("sink", "source"), defaults):
                subprocess.run(["pactl", f"set-default-{kind}", name], capture_output=True, timeout=10, check=False)
            for module in reversed(modules):
                subprocess.run(["pactl", "unload-module", module], capture_output=True, timeout=10, check=False)
    except subprocess.CalledProcessError as e:
        raise RoomUnavailable(f"PulseAudio refused {' '.join(e.cmd)}: {e.stderr}") from None
    finally:
        if started:
            subprocess.run(["pulseaudio", "--kill"], capture_output=True, timeout=20, check=False)


def launch(playwright_browser):
    """Chromium from the bench's Playwright with the real default devices (no fake ones) and its sound on."""
    args = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--use-fake-ui-for-media-stream",
            "--autoplay-policy=no-user-gesture-required", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]
    return playwright_browser.browser_type.launch(executable_path=str(CHROMIUM), headless=True, args=args,
                                                  ignore_default_args=["--mute-audio"])


def write_questions(folder: Path, questions: tuple[str, ...], n: int) -> list[tuple[str, Path]]:
    """`n` questions in turn, one WAV each (eSpeak NG, as the other voice walks)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        text = questions[k % len(questions)]
        out.append((text, media.write_questions(folder / f"q{k}.wav", (text,), slot_s=8.0, lead_s=LEAD_S).path))
    return out


@contextmanager
def _hands_free(browser, url: str, cancel_echo: bool = True):
    """A new person on the Voice + camera tab, hands-free and listening -> (page, the echo cancellation applied)."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, permissions=["camera", "microphone"])
    context.add_init_script(CANVAS_CAMERA if cancel_echo else "window.__fvEcho = false;\n" + CANVAS_CAMERA)
    context.add_init_script(pg.RECORDER)
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(url)
        page.get_by_role("tab", name="Voice + camera").click()
        pg.watch(page, "transcript", "#voice-transcript textarea")
        page.locator("#voice-start").click()
        page.wait_for_function("() => window.__fvLink && window.__fvLink.state === 'on'")
        yield page, page.evaluate("() => window.__fvCapture && window.__fvCapture.getSettings().echoCancellation")
        page.locator("#voice-stop").click()
    finally:
        context.close()


def walk(browser, url: str, questions: list[tuple[str, Path]], listen_s: float, cancel_echo: bool = True) -> dict:
    """Hands-free; per question played into the room, the answer's stops while it played for `listen_s`."""
    with _hands_free(browser, url, cancel_echo) as (page, applied):
        rows = [_answer(page, text, wav, listen_s) for text, wav in questions]
    return {"echo_cancellation": applied, "answers": len(rows), "answered": sum(r["sounded"] for r in rows),
            "stopped": sum(1 for r in rows if r["stops"]), "stops": sum(r["stops"] for r in rows),
            "heard": sum(1 for r in rows if r["heard_after"]), "runs": rows}


def barge_in(browser, url: str, questions: list[tuple[str, Path]], after_s: float) -> dict:
    """In the room, each question after the first is played `after_s` into the answer to the one before (if that
    question got none within `ANSWER_WAIT_S`, then): the person talks over the answer while its echo reaches the
    microphone too. Per question: its speech start (when `paplay` was started, plus the file's lead-in;
    PulseAudio's own latency not counted) -> the sound held or hushed (`walks.barge_rows`), and the transcript the
    page showed for it (`heard_per_question`)."""
    starts, players = [], []
    with _hands_free(browser, url) as (page, _):
        for k, (_, wav) in enumerate(questions):
            if k:  # into the answer to the question before; unheard, that one's still playing (or the room's quiet)
                sounded = _sound_after(page, starts[-1], ANSWER_WAIT_S)
                time.sleep(max(0.0, (sounded or time.time()) + after_s - time.time()))
            starts.append(time.time() + LEAD_S)
            players.append(subprocess.Popen(["paplay", f"--device={SINK}", str(wav)]))
        _sound_after(page, starts[-1], ANSWER_WAIT_S)
        hushes, holds = page.evaluate("() => [window.__fvLink.hushes, window.__fvLink.holds]")
        rec = pg.recorded(page)
    for player in players:
        player.wait(timeout=30)
    shown = [(t, text) for t, key, text in rec["log"] if key == "transcript" and text.strip()]
    heard = heard_per_question(shown, starts[1:])
    rows = walks.barge_rows({**rec, "speech_starts": starts[1:]}, hushes, holds)
    asked = [q for q, _ in questions[1:]]  # every question is played: one start each
    return {"questions": len(asked), "stopped": len(rows), "runs": rows,
            "heard": [{"question": q, "transcript": h} for q, h in zip(asked, heard)],
            "wer": pooled_word_error_rate(zip(asked, heard))}


def heard_per_question(shown: list[tuple[float, str]], starts: list[float]) -> list[str]:
    """The transcript the page showed last between each question's start and the next one's ("" if none): one
    heard late, or twice, is not counted for the question after it."""
    ends = [*starts[1:], float("inf")]
    return [next((text for t, text in reversed(shown) if a < t < b), "") for a, b in zip(starts, ends)]


def _sound_after(page, at: float, timeout_s: float) -> float | None:
    """When an answer began to sound in the page after `at` (wall clock); None if none did within `timeout_s`."""
    end = time.time() + timeout_s
    while time.time() < end:
        if later := [t for t in pg.recorded(page)["plays"] if t > at]:
            return later[0]
        time.sleep(0.05)
    return None


def _answer(page, question: str, wav: Path, listen_s: float) -> dict:
    count = "() => [window.__fvLink.hushes.length, window.__fv.plays.length, window.__fvLink.holds.length]"
    hushes, plays, holds = page.evaluate(count)
    subprocess.run(["paplay", f"--device={SINK}", str(wav)], check=True, timeout=30)
    asked = time.time()
    end = asked + 30
    while time.time() < end and page.evaluate(count)[1] == plays:  # the counts only: the answer is being made
        time.sleep(0.1)
    rec = pg.recorded(page)
    first = rec["plays"][plays] if len(rec["plays"]) > plays else None
    if first is not None:
        time.sleep(listen_s)  # the answer plays; nobody speaks
    line = page.evaluate("() => window.__fvLink")
    stops = [h["at"] / 1000 for h in line["hushes"][hushes:] if h["stopped"]]
    played_on = [h for h in line["holds"][holds:] if h["sounding"] and h["resumed"]]  # held over a burst
    # the question's own transcript is shown while its recording's trailing silence plays: what comes after is
    # what the page heard from the room meanwhile (the answer's echo, if the canceller let it through)
    heard = sorted({text for t, key, text in pg.recorded(page)["log"] if key == "transcript" and t > asked})
    return {"question": question, "sounded": first is not None, "stops": len(stops),
            "held_and_played_on": len(played_on),
            "holds_after_first_sound_s": [round(h["at"] / 1000 - first, 2) for h in played_on] if first else [],
            "held_s": [round((h["resumed"] - h["at"]) / 1000, 2) for h in played_on],
            "stops_after_first_sound_s": [round(t - first, 2) for t in stops] if first else [], "heard_after": heard}
