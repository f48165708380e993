"""The Camera snapshot tab: capture a webcam frame, ask about it, and see a large TTFT readout.

The capture is prepared (encoded + prefilled) at once, so the TTFT after Analyse is mostly the question.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import gradio as gr
import numpy as np

from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.events import InputError, Request
from fastvlm.engine.prompt import question_or_default

from .backend import Backend
from .inputs import bounded_frames
from .settings import AppSettings
from .widgets import (
    SNAPSHOT_PRESETS,
    Partial,
    Turnstile,
    fail,
    follow,
    format_ttft,
    preset_buttons,
    readout_html,
    toast_text,
    wire_answer,
)

NO_CAPTURE = "Take a snapshot first: allow the camera, then press the camera button under the preview."
BLACK_FRAME = ("The camera sent a black frame: is the lens covered, the room dark, or the camera used by "
               "another program? Take the snapshot again.")
NO_TTFT_YET = "TTFT – · total –"


@dataclass
class SnapshotSession:
    turnstile: Turnstile = field(default_factory=Turnstile)


def is_blank(frame: np.ndarray) -> bool:
    """A frame a camera sends when it delivers nothing useful (all black)."""
    return frame.size == 0 or int(frame.max()) < 8


def ttft_html(part: Partial | None) -> str:
    if part is None:
        return readout_html(NO_TTFT_YET, "ttft")
    total = part.stats.total_s if part.stats is not None else None
    return readout_html(format_ttft(part.ttft_s, total), "ttft")


# -- handlers --------------------------------------------------------------------------------------------------
def on_capture(engine: Backend, frame: np.ndarray | None, resolution: int | None) -> None:
    """Prepare the capture right away; warn about a frame the camera left black."""
    if frame is None:
        return
    if is_blank(frame):
        gr.Warning(BLACK_FRAME, title="Nothing from the camera")
        return
    try:
        engine.prepare(frame, resolution)
    except InputError as e:
        gr.Warning(toast_text(e), title="This frame cannot be used")


def guard(session: SnapshotSession, frame: np.ndarray | None, *_) -> None:
    if frame is None:
        raise gr.Error(NO_CAPTURE, title="No snapshot", print_exception=False)
    session.turnstile.enter()


def analyse(engine: Backend, session: SnapshotSession, frame: np.ndarray | None, question: str,
            resolution: int | None, max_new_tokens: int, every_s: float = 0.05) -> Iterator[tuple[str, str]]:
    """Stream the answer about the capture: yields (answer text, TTFT readout html)."""
    ticket = session.turnstile.active
    try:
        if frame is None:
            raise gr.Error(NO_CAPTURE, title="No snapshot", print_exception=False)
        request = Request(frame, question_or_default(question or ""),
                          options=GenerationOptions(max_new_tokens=int(max_new_tokens)), resolution=resolution)
        yield "", ttft_html(Partial())
        try:
            for part in follow(engine.stream(request, cancel=session.turnstile.token), every_s):
                yield part.text, ttft_html(part)
        except gr.Error:
            yield "", ttft_html(None)
            raise
        except Exception as e:
            raise fail(e) from e
    finally:
        session.turnstile.leave(ticket)


# -- layout ----------------------------------------------------------------------------------------------------
def build_snapshot_tab(engine: Backend, settings: AppSettings, decodes: threading.Semaphore) -> None:
    session = gr.State(SnapshotSession(),
                       delete_callback=lambda s: s.turnstile.release())  # a closed tab stops its answer
    resolution = settings.camera_resolution
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            camera = bounded_frames(gr.Image(sources=["webcam"], type="numpy", label="Camera", height=340,
                                             webcam_options=gr.WebcamOptions(mirror=False), elem_id="snapshot-camera"),
                                    decodes)
        with gr.Column(scale=3, min_width=320):
            ttft = gr.HTML(ttft_html(None), label="TTFT", elem_id="snapshot-ttft")
            answer = gr.Textbox(label="Answer", lines=6, max_lines=16, interactive=False, buttons=["copy"],
                                elem_id="snapshot-answer")
            question = gr.Textbox(label="Question", placeholder=SNAPSHOT_PRESETS[0], value=SNAPSHOT_PRESETS[0],
                                  elem_id="snapshot-question")
            preset_buttons(SNAPSHOT_PRESETS, question)
            with gr.Row():
                run = gr.Button("Analyse", variant="primary", elem_id="snapshot-analyse")
                stop = gr.Button("Stop", variant="stop", elem_id="snapshot-stop")

    def capture(frame):
        on_capture(engine, frame, resolution)

    def answer_fn(state, frame, question):
        yield from analyse(engine, state, frame, question, resolution, settings.snapshot_max_new_tokens,
                           settings.ui_update_s)

    camera.input(capture, camera, None, show_progress="hidden", concurrency_id="prepare", concurrency_limit=None,
                 api_name="prepare_snapshot")
    wire_answer([run.click, question.submit], guard, answer_fn, [session, camera, question], [answer, ttft], stop,
                session, api_name="analyse_snapshot")
