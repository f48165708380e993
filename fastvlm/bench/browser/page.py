"""Driving the app's page as a person does, and what the page itself records (its own clock).

`RECORDER` is installed in every page before the app's scripts run. It keeps, in `window.__fv`:
  clicks   element id -> wall-clock ms (performance.timeOrigin + the click event's timeStamp) of the last click
  first    a promise per `arm_first_text()`: page ms when the watched element first shows new, non-empty text
  mic      when the page's own microphone stream (the fake one) starts and stops carrying speech: an analyser
           on the stream Gradio opened, 10 ms polls of the peak level, speech ended after 600 ms below it
  plays    wall-clock ms of every 'playing' event of a media element not showing a camera, and of the first
           sentence of each answer the voice line plays (the spoken answer starts to sound)
  log      (wall-clock ms, key, text) each time a watched element's text (or HTML) changes (`watch()`), 20 ms polls
Times are wall-clock milliseconds of this machine (the server's `time.time()` is the same clock)."""

from __future__ import annotations

import re

RECORDER = r"""
(() => {
  const R = window.__fv = {clicks: {}, first: {}, mic: {opened: null, starts: [], ends: []}, plays: [], log: []};
  const wall = (t) => performance.timeOrigin + t;
  document.addEventListener('click', (e) => {
    const el = e.target.closest && e.target.closest('[id]');
    if (el) R.clicks[el.id] = wall(e.timeStamp);
  }, true);
  // The spoken answer may play from an <audio> in a shadow root or detached (the waveform player's), whose
  // events never reach the document: every media element that is asked to play is listened to itself.
  const played = (el) => { if (!el.srcObject) R.plays.push(wall(performance.now())); };
  const hear = (el) => {
    if (el.__fvHeard) return;
    el.__fvHeard = true;
    el.addEventListener('playing', () => played(el));
    if (!el.paused && el.played.length) played(el);  // started before it was found (autoplay): within 20 ms
  };
  // the voice line (ui/voice/link.js) plays through Web Audio and says when each sentence starts to sound, and
  // of which turn: an answer's first sentence is its first sound (its later ones may start after the next question)
  window.addEventListener('fastvlm-voice-playing', (e) => {
    if (e.detail.turn === R.voiceTurn) return;
    R.voiceTurn = e.detail.turn;
    R.plays.push(e.detail.at);
  });
  const play = HTMLMediaElement.prototype.play;
  HTMLMediaElement.prototype.play = function (...args) { hear(this); return play.apply(this, args); };
  const deep = (root, out) => {
    for (const el of root.querySelectorAll('*')) {
      if (el instanceof HTMLMediaElement) out.push(el);
      if (el.shadowRoot) deep(el.shadowRoot, out);
    }
    return out;
  };
  R.hearMedia = (sel) => setInterval(() => {
    const root = document.querySelector(sel);
    if (root) deep(root, []).forEach(hear);
  }, 20);
  const read = (sel, html) => {
    const el = document.querySelector(sel);
    return el ? ((html ? el.innerHTML : el.value !== undefined ? el.value : el.innerText) || '') : '';
  };
  R.armFirst = (name, sel, timeoutMs, busySel) => {
    const before = read(sel), busyBefore = busySel && read(busySel), until = performance.now() + timeoutMs;
    // the answer box emptied, or the readout shows a new answer's TTFT: a fast answer the same as the last (the
    // tiny models) may come and go between two polls. Not the readout's 'TTFT …' (asked, no token yet): the page
    // may show it a render before it empties the box, and the old answer would count as the new one's first text
    let cleared = false;
    R.first[name] = new Promise((resolve) => {
      const iv = setInterval(() => {
        const now = read(sel), busy = busySel && read(busySel);
        cleared = cleared || !now.trim() || (busySel && busy !== busyBefore && !busy.includes('TTFT …'));
        if (now.trim() && (now !== before || cleared)) { clearInterval(iv); resolve(wall(performance.now())); }
        else if (performance.now() > until) { clearInterval(iv); resolve(null); }
      }, 5);
    });
  };
  R.watch = (key, sel, html) => {
    let last = read(sel, html);
    setInterval(() => {
      const now = read(sel, html);
      if (now !== last) { last = now; R.log.push([wall(performance.now()), key, now]); }
    }, 20);
  };
  const tap = (stream) => {
    const ctx = new AudioContext(), analyser = ctx.createAnalyser();
    analyser.fftSize = 1024;
    ctx.createMediaStreamSource(stream).connect(analyser);
    const buf = new Float32Array(analyser.fftSize);
    let loud = false, lastLoud = 0;
    R.mic.opened = wall(performance.now());
    setInterval(() => {
      analyser.getFloatTimeDomainData(buf);
      let peak = 0;
      for (const x of buf) peak = Math.max(peak, Math.abs(x));
      const now = wall(performance.now());
      if (peak > 0.02) { if (!loud) R.mic.starts.push(now); loud = true; lastLoud = now; }
      else if (loud && now - lastLoud > 600) { loud = false; R.mic.ends.push(lastLoud); }
    }, 10);
  };
  const md = navigator.mediaDevices;
  if (md && md.getUserMedia) {
    const open = md.getUserMedia.bind(md);
    md.getUserMedia = async (constraints) => {
      const stream = await open(constraints);
      if (constraints && constraints.audio && R.mic.opened === null) tap(stream);
      return stream;
    };
  }
})();
"""

IMAGE_TTFT = re.compile(r"TTFT (\d+ ms|[\d.]+ s)")
TOKENS_PER_S = re.compile(r"([\d.]+) tok/s · (\d+) tokens")
COUNTER = re.compile(r"answered (\d+) · skipped (\d+)")


def seconds(shown: str) -> float:
    """'640 ms' or '12.3 s' (how `ui.widgets.ms` writes a time) -> seconds."""
    value, unit = shown.split()
    return float(value) / (1000 if unit == "ms" else 1)


def open_app(browser, url: str, timeout_s: float = 60.0):
    """A new person: a fresh context (camera and microphone allowed) with the recorder, the app loaded."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000}, permissions=["camera", "microphone"])
    context.add_init_script(RECORDER)
    page = context.new_page()
    page.set_default_timeout(timeout_s * 1000)
    page.goto(url)
    page.locator("#image-input").wait_for()
    return context, page


def arm_first_text(page, name: str, selector: str, timeout_s: float = 120.0, busy: str | None = None) -> None:
    """Start watching `selector` for non-empty text that is new, or shown again after the box emptied or the
    `busy` readout showed a new answer's TTFT (not 'TTFT …': asked, no token yet); `first_text_at(page, name)`
    waits for it."""
    page.evaluate("([n, s, t, b]) => window.__fv.armFirst(n, s, t, b)", [name, selector, timeout_s * 1000, busy])


def first_text_at(page, name: str) -> float:
    """Wall-clock seconds when the armed element first showed new text (the page's clock, 5 ms polls)."""
    at = page.evaluate("(n) => window.__fv.first[n]", name)
    if at is None:
        raise TimeoutError(f"the page never showed new text for {name!r}: see the app's log for the request")
    return at / 1000


def clicked_at(page, element_id: str) -> float:
    """Wall-clock seconds of the last click on `element_id`, as the page's click event stamped it."""
    return page.evaluate("(id) => window.__fv.clicks[id]", element_id) / 1000


def hear_media(page, selector: str) -> None:
    """Also listen to the media elements under `selector`, shadow roots included (20 ms scans)."""
    page.evaluate("(s) => window.__fv.hearMedia(s)", selector)


def watch(page, key: str, selector: str, html: bool = False) -> None:
    """Log every change of `selector`'s text (or inner HTML) under `key`, with the page's time."""
    page.evaluate("([k, s, h]) => window.__fv.watch(k, s, h)", [key, selector, html])


def recorded(page) -> dict:
    """Everything the recorder kept (mic, plays, log), times in wall-clock seconds."""
    r = page.evaluate("() => ({mic: window.__fv.mic, plays: window.__fv.plays, log: window.__fv.log})")
    s = lambda ms: None if ms is None else ms / 1000  # noqa: E731
    mic = r["mic"]
    return {"mic_opened": s(mic["opened"]), "speech_starts": [s(t) for t in mic["starts"]],
            "speech_ends": [s(t) for t in mic["ends"]], "plays": [s(t) for t in r["plays"]],
            "log": [(s(t), key, text) for t, key, text in r["log"]]}


def open_camera(page, root: str) -> None:
    """Grant the (fake) webcam to the camera box `root` and wait until its video plays."""
    page.locator(f"{root} [title='grant webcam access'] button").click()
    page.wait_for_function(f"() => document.querySelector('{root} video')?.readyState >= 2")


def live_counts(page) -> tuple[int, int]:
    """(answered, skipped) as the Live tab's counter shows them."""
    match = COUNTER.search(page.locator("#live-counter").inner_text())
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)
