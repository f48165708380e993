"""The camera tabs in Chromium with a fake webcam: snapshot + TTFT readout, and Live with a slowed engine."""

import itertools
import re
import time

import pytest

from fastvlm.bench.browser.page import live_counts as counts
from fastvlm.bench.browser.page import open_camera
from tests.browser.pages import screenshot, wait_settled, wait_until

pytestmark = pytest.mark.browser

READOUT = re.compile(r"TTFT \d+ ms · total (\d+ ms|\d+\.\d s)")


def test_snapshot_is_answered_with_a_large_ttft_readout(new_page, app_server):
    app_server.lm.endless = True
    page = new_page()
    page.get_by_role("tab", name="Camera snapshot").click()
    assert page.locator("#snapshot-ttft").inner_text().strip() == "TTFT – · total –"  # visible before any capture
    open_camera(page, "#snapshot-camera")
    page.locator("#snapshot-camera button[aria-label='capture photo']").click()
    page.locator("#snapshot-camera img").first.wait_for()
    page.locator("#snapshot-analyse").click()
    readout = wait_until(lambda: READOUT.search(page.locator("#snapshot-ttft").inner_text()), what="the TTFT readout")
    assert page.locator("#snapshot-answer textarea").input_value().strip()
    font_px = page.locator("#snapshot-ttft .readout").evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert font_px >= 28, f"the TTFT readout is {font_px}px: not large"
    screenshot(page, "snapshot-tab")
    assert readout


def test_live_answers_three_frames_skips_while_busy_and_never_overlaps(new_page, app_server):
    lm = app_server.lm
    lm.delay, lm.endless = 0.15, True  # 12 tokens: ~1.8 s per answer against a 1 s tick
    page = new_page()
    errors = []  # the browser's console errors: evidence if the page reloads (Gradio does after a lost connection)
    page.on("console", lambda message: message.type == "error" and errors.append(message.text[:200]))
    page.get_by_role("tab", name="Live").click()
    t0 = time.monotonic()
    page.locator("#live-start").click()  # also starts the webcam's stream
    wait_until(lambda: counts(page)[0] >= 3, 40, every=0.2, what="three answered frames")
    _, skipped = counts(page)
    assert skipped >= 1, "no frame was skipped although every answer outlasted the tick"
    spans = sorted(s for s in lm.spans if s[0] >= t0)
    assert lm.max_active == 1 and len(spans) >= 3
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), "two answers overlapped"
    items = page.locator("#live-feed .feed-item").all_inner_texts()
    assert len(items) >= 3 and all("TTFT" in item for item in items)
    times = [re.match(r"(\d\d:\d\d:\d\d)", item).group(1) for item in items]
    assert times == sorted(times, reverse=True)  # newest first
    screenshot(page, "live-tab")
    page.locator("#live-stop").click()
    wait_until(lambda: not app_server.engine.busy, 3, what="Stop to free the engine")
    stopped, freed = counts(page), time.monotonic()
    page.evaluate("window.liveStopped = true")  # gone if the page reloads
    time.sleep(2.5)  # two ticks: a Live loop still running would answer or skip a frame in this time
    assert page.evaluate("window.liveStopped === true"), f"the page reloaded after Stop; console errors: {errors}"
    # the counts, not the box's text: Gradio may still show a pending event's timer ("0.0s") over it
    assert counts(page) == stopped, f"the counter changed after Stop: {stopped} -> {counts(page)}"
    assert not app_server.engine.busy and lm.active == 0
    assert not [s for s in lm.spans if s[0] >= freed], "an answer started after Stop"


def test_a_photo_retaken_while_the_last_is_prepared_is_prepared_instead(new_page, app_server, monkeypatch):
    """Capture, then remove it and capture again while the first photo's prepare still holds the engine: the
    retake's prepare takes over (not skipped), so Analyse finds its encoding ready."""
    from fastvlm.engine.kv import LRU

    engine = app_server.engine
    wait_settled(engine)  # nothing left over from an earlier test holds the engine
    encoded = []  # vision encodes, counted; from an empty cache (earlier tests' frames are cached, the clip loops)
    encode, prepare, prepared = engine.vision.encode, engine.prepare, []  # each prepare: [started, its result]

    def recorded_prepare(*args, **kwargs):
        prepared.append([round(time.monotonic(), 2)])
        prepared[-1].append(prepare(*args, **kwargs))
        return prepared[-1][-1]

    monkeypatch.setattr(engine.vision, "encode", lambda pixels: encoded.append(1) or encode(pixels))
    monkeypatch.setattr(engine, "prepare", recorded_prepare)
    monkeypatch.setattr(engine, "_embeddings", LRU(8))
    app_server.lm.prefill_delay = 2.0
    page = new_page()
    page.get_by_role("tab", name="Camera snapshot").click()
    open_camera(page, "#snapshot-camera")
    page.locator("#snapshot-camera button[aria-label='capture photo']").click()
    wait_until(lambda: encoded and engine.busy, 5, every=0.01, what="the first photo encoded, its prefill running")
    page.locator("#snapshot-camera button[aria-label='Remove Image']").click()
    open_camera(page, "#snapshot-camera")  # the fake clip starts over: wait for another frame than the first
    time.sleep(0.5)
    page.locator("#snapshot-camera button[aria-label='capture photo']").click()
    page.locator("#snapshot-camera img").first.wait_for()
    assert engine.busy and len(prepared[0]) == 1, "the first prepare ended before the retake: the test proves nothing"
    wait_settled(engine)  # both prepares over
    assert len(encoded) == 2, f"{len(encoded)} photos encoded before Analyse: the retake was not prepared " \
                              f"(prepares [start, result]: {prepared})"
    app_server.lm.prefill_delay = 0.0
    page.locator("#snapshot-analyse").click()
    wait_until(lambda: READOUT.search(page.locator("#snapshot-ttft").inner_text()), what="the TTFT readout")
    assert len(encoded) == 2, "Analyse encoded the retake again"
