"""The Live tab: the webcam streams, and every N seconds the latest frame is answered with a preset.

Frames arrive through the webcam's stream event and only replace the person's latest frame. A `gr.Timer`
ticks every N seconds; each tick asks the engine with `wait=0`, so when the engine is still busy (with this
person's last frame or anyone else's request) the frame is skipped and counted: the latest frame wins,
there is no backlog, and two inferences never run at once.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

import gradio as gr
import numpy as np

from fastvlm.engine.cancel import CancelToken
from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.events import Busy, Request
from fastvlm.engine.prompt import question_or_default

from .backend import Backend
from .settings import AppSettings
from .inputs import bounded_frames
from .widgets import LIVE_PRESETS, Partial, fail, follow, ms, readout_html

NO_FRAMES = ("No camera frames are arriving: allow camera access, and press Record on the camera "
             "if it is not streaming.")
# Start/Stop also start/stop the webcam's own stream, so one click does both (the person can still use the
# camera's Record button). Written against Gradio's webcam markup; if that changes, the buttons still work.
START_JS = """async (...args) => {
  const root = document.getElementById('live-camera');
  const find = (sel) => root && root.querySelector(sel);
  const access = find('[title="grant webcam access"] button');
  if (access) access.click();
  for (let i = 0; i < 50; i++) {
    const rec = find('button[aria-label="capture photo"]');
    if (rec) { if (/record/i.test(rec.textContent)) rec.click(); break; }
    await new Promise((r) => setTimeout(r, 100));
  }
  return args;
}"""
STOP_JS = """(...args) => {
  const rec = document.querySelector('#live-camera button[aria-label="capture photo"]');
  if (rec && /stop/i.test(rec.textContent)) rec.click();
  return args;
}"""


@dataclass
class FeedItem:
    at: str  # wall-clock time the frame was taken up, HH:MM:SS
    text: str = ""
    ttft_s: float | None = None
    state: str = "answering"  # answering | done | stopped


@dataclass
class LiveSession:
    """One person's live run: the latest frame, the counters, the feed (newest first)."""

    frame: np.ndarray | None = None
    frame_seq: int = 0  # frames received
    answered_seq: int = 0  # frame_seq of the last frame taken up
    answered: int = 0
    skipped: int = 0
    feed: list[FeedItem] = field(default_factory=list)
    running: bool = False
    run: int = 0  # bumped by Start and Stop: an answer from an older run stops at its next token
    cancel: CancelToken | None = None  # the run's: Stop also ends an encode or prefill, or a request not yet begun
    warned: bool = False


def counter_text(session: LiveSession) -> str:
    return f"answered {session.answered} · skipped {session.skipped}"


def feed_html(feed: list[FeedItem]) -> str:
    if not feed:
        return '<div class="live-feed empty">Answers appear here, newest first.</div>'
    rows = []
    for item in feed:
        ttft = "TTFT …" if item.ttft_s is None else f"TTFT {ms(item.ttft_s)}"
        mark = {"answering": " · answering…", "stopped": " · stopped"}.get(item.state, "")
        rows.append(f'<li class="feed-item {item.state}"><span class="feed-meta">{item.at} · {ttft}{mark}</span> '
                    f'<span class="feed-text">{html.escape(item.text)}</span></li>')
    return f'<ol class="live-feed">{"".join(rows)}</ol>'


# -- handlers --------------------------------------------------------------------------------------------------
def remember(session: LiveSession, frame: np.ndarray | None) -> None:
    """The webcam's stream event: keep only the latest frame."""
    if frame is not None:
        session.frame, session.frame_seq = frame, session.frame_seq + 1


def start(session: LiveSession, interval: float) -> tuple:
    _end_run(session)
    session.running, session.warned, session.cancel = True, False, CancelToken()
    return gr.Timer(value=float(interval), active=True), readout_html(counter_text(session), "counter")


def stop(session: LiveSession) -> gr.Timer:
    _end_run(session)
    session.running = False
    return gr.Timer(active=False)


def _end_run(session: LiveSession) -> None:
    session.run += 1
    if session.cancel is not None:
        session.cancel.cancel()


def tick(engine: Backend, session: LiveSession, question: str, max_new_tokens: int, resolution: int | None = None,
         feed_size: int = 20, every_s: float = 0.05) -> Iterator[tuple[str, str]]:
    """One timer tick: answer the latest frame, or count it skipped when the engine is busy.
    Yields (counter html, feed html)."""
    run, cancel, frame, seq = session.run, session.cancel, session.frame, session.frame_seq
    if not session.running:
        yield gr.skip(), gr.skip()
        return
    if frame is None or seq == session.answered_seq:  # nothing new from the camera
        if not session.warned:
            session.warned = True
            gr.Warning(NO_FRAMES, title="No camera frames")
        yield gr.skip(), gr.skip()
        return
    request = Request(frame, question_or_default(question or ""),
                      options=GenerationOptions(max_new_tokens=int(max_new_tokens)), resolution=resolution)
    parts = follow(engine.stream(request, wait=0, cancel=cancel), every_s)
    try:
        first = next(parts)
    except Busy:
        session.skipped += 1
        yield readout_html(counter_text(session), "counter"), gr.skip()
        return
    except gr.Error:
        raise
    except Exception as e:
        raise fail(e) from e
    if session.run != run:  # Stopped before the first word (the request ended in the engine's line or its encode)
        parts.close()
        yield gr.skip(), gr.skip()
        return
    yield from _answer(session, chain([first], parts), seq, run, feed_size)


def _answer(session: LiveSession, parts: Iterator[Partial], seq: int, run: int, feed_size: int
            ) -> Iterator[tuple[str, str]]:
    session.answered_seq, session.warned = seq, False
    item = FeedItem(time.strftime("%H:%M:%S"))
    session.feed.insert(0, item)
    del session.feed[feed_size:]
    try:
        for part in parts:
            if session.run != run:  # Stop was pressed: stop decoding now, even if the cancel missed this event
                break
            item.text, item.ttft_s = part.text, part.ttft_s
            if part.stats is not None:
                item.state = "done"
                session.answered += 1
            yield readout_html(counter_text(session), "counter"), feed_html(session.feed)
    except gr.Error:
        raise
    except Exception as e:
        raise fail(e) from e
    finally:
        close = getattr(parts, "close", None)
        if close is not None:
            close()
        if item.state == "answering":
            item.state = "stopped"


# -- layout ----------------------------------------------------------------------------------------------------
def build_live_tab(engine: Backend, settings: AppSettings, decodes: threading.Semaphore) -> None:
    session = gr.State(LiveSession())
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            camera = bounded_frames(gr.Image(sources=["webcam"], streaming=True, type="numpy", label="Camera",
                                             height=300, webcam_options=gr.WebcamOptions(mirror=False),
                                             elem_id="live-camera"), decodes)
            question = gr.Dropdown(list(LIVE_PRESETS), value=LIVE_PRESETS[0], allow_custom_value=True,
                                   label="Ask every frame", elem_id="live-question")
            interval = gr.Slider(1, 10, value=settings.live_interval_s, step=1, label="Every N seconds",
                                 elem_id="live-interval")
            with gr.Row():
                start_btn = gr.Button("Start live", variant="primary", elem_id="live-start")
                stop_btn = gr.Button("Stop live", variant="stop", elem_id="live-stop")
        with gr.Column(scale=3, min_width=320):
            counter = gr.HTML(readout_html(counter_text(LiveSession()), "counter"), label="Frames",
                              elem_id="live-counter")
            feed = gr.HTML(feed_html([]), label="Feed", elem_id="live-feed")
    timer = gr.Timer(settings.live_interval_s, active=False)

    def on_tick(state, question):
        yield from tick(engine, state, question, settings.live_max_new_tokens, settings.camera_resolution,
                        settings.live_feed_size, settings.ui_update_s)

    camera.stream(remember, [session, camera], None, stream_every=settings.frame_every_s, concurrency_id="frames",
                  concurrency_limit=None, show_progress="hidden", api_visibility="private")
    ticks = timer.tick(on_tick, [session, question], [counter, feed], trigger_mode="multiple", concurrency_id="live",
                       concurrency_limit=None, show_progress="hidden", api_visibility="private")
    start_btn.click(start, [session, interval], [timer, counter], js=START_JS, queue=False, api_visibility="private")
    stop_btn.click(stop, session, timer, cancels=[ticks], js=STOP_JS, queue=False, api_visibility="private")
    interval.change(lambda v: gr.Timer(value=float(v)), interval, timer, queue=False, api_visibility="private")
