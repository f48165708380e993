"""The Image tab: upload an image, ask, ask follow-ups; answers stream into a chat with a metrics line.

A person's conversation lives in their `ImageSession` (a `gr.State`); the engine keeps none. An upload
starts a new conversation and is prepared (encoded + prefilled) while the question is typed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import gradio as gr

from fastvlm.engine.config import FAST_RESOLUTION, TRAINED_RESOLUTION, GenerationOptions
from fastvlm.engine.events import InputError, Request
from fastvlm.engine.prompt import Turn, question_or_default

from .backend import Backend
from .inputs import readable_uploads
from .settings import AppSettings
from .widgets import (
    IMAGE_PRESETS,
    INSTANT,
    Partial,
    Turnstile,
    fail,
    follow,
    format_metrics,
    ms,
    preset_buttons,
    readout_html,
    toast_text,
    wire_answer,
)

NO_IMAGE = "Upload an image first: drop a file on the image box, paste one, or click the box to choose a file."


@dataclass
class ImageSession:
    """One person's conversation about one image."""

    turnstile: Turnstile = field(default_factory=Turnstile)
    image: str | None = None  # the conversation's image: a path in Gradio's upload cache
    history: list[Turn] = field(default_factory=list)
    conversation: int = 0  # bumped by a new image or "New conversation"; late answers of older ones are dropped
    shown: tuple[int, Turn] | None = None  # the answer on screen: its turnstile ticket and its turn so far
    settled: int = 0  # answers with tickets up to this one are in the history: what they show late is ignored

    def restart(self, image: str | None) -> None:
        self.image, self.history, self.shown = image, [], None
        self.conversation += 1

    def show(self, conversation: int, ticket: int, turn: Turn) -> None:
        """The answer with `ticket` now shows `turn`, unless a new conversation or `settle` came first. (Ticket 0:
        asked through the API, which has no guard, so no next question is let in while it winds down.)"""
        if conversation == self.conversation and (ticket > self.settled or ticket == 0):
            self.shown = (ticket, turn)

    def settle(self, ticket: int | None = None) -> None:
        """Put the answer on screen (the one with `ticket`, or whichever) in the history as shown, so Stop keeps
        what was read. Called as it ends and as the next question is let in: a stopped answer may still be
        winding down then, and the next question must be asked after it."""
        shown = self.shown
        if shown is not None and ticket in (None, shown[0]):
            self.settled, self.shown = max(self.settled, shown[0]), None
            if shown[1].answer:  # stopped before its first word: nothing for a follow-up to go on from
                self.history.append(shown[1])


def resolution_choices(configured: int, served: list[int] | None = None) -> list[tuple[str, int]]:
    """The Radio's choices: 1024 and 512 (and the configured size), only those the vision graph serves
    (`served`, from `describe()["resolutions"]` once the model is loaded; a fixed-size graph serves one)."""
    names = {TRAINED_RESOLUTION: "accurate", FAST_RESOLUTION: "fast"}
    sizes = [s for s in (*(served or (TRAINED_RESOLUTION, FAST_RESOLUTION)), configured) if s]  # configured is served
    return [(f"{s} · {names.get(s, 'configured')}", s) for s in dict.fromkeys(sizes)]


def resolution_radio(info: dict) -> gr.Radio:
    """The Radio as the loaded model allows (sent on each page load: the model may load after the page)."""
    return gr.Radio(resolution_choices(info["resolution"], info.get("resolutions")), value=info["resolution"])


def messages(history: list[Turn] | tuple[Turn, ...], pending: tuple[str, str] | None = None) -> list[dict]:
    """The chat view's value: earlier turns, then the question being answered and its answer so far."""
    turns = [(t.question, t.answer) for t in history] + ([pending] if pending else [])
    out: list[dict] = []
    for question, answer in turns:
        out += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return out


def metrics_text(part: Partial) -> str:
    if part.stats is not None:
        return format_metrics(part.stats)
    if part.ttft_s is not None:
        return f"TTFT {ms(part.ttft_s)} · answering…"
    return "waiting for the model…"


# -- handlers (plain functions: the tests call them with a fake engine) ------------------------------------
def new_conversation(session: ImageSession, image: str | None = None) -> tuple[list, str]:
    """A new upload (`image`), a cleared image box or "New conversation": the chat starts over, and the answer
    running or still in line for the old conversation is withdrawn (as by Stop), so the next Submit gets in at
    once. A question already let in about the new image (its Submit beat the upload's event) goes on."""
    if image is None or session.turnstile.subject != image:
        session.turnstile.release()
    session.restart(image if image is not None else session.image)
    return [], readout_html("", "metrics")


def prepare(engine: Backend, image: str | None, resolution: int) -> None:
    """Encode the upload while the question is typed; skipped when the engine is busy."""
    if image is None:
        return
    try:
        engine.prepare(image, int(resolution))
    except InputError as e:
        gr.Warning(toast_text(e), title="This image cannot be used")


def keep_in_cache(image) -> None:
    """Refresh an upload's age: the cache sweep (`ui.cache.CacheSweeper`) deletes files by age, not by use."""
    if isinstance(image, (str, os.PathLike)):
        try:
            os.utime(image)
        except OSError:  # already gone: loading it says so
            pass


def guard(session: ImageSession, image: str | None, *_) -> None:
    """Runs at once on Submit: refuses a missing image or a second click while an answer streams."""
    if image is None:
        raise gr.Error(NO_IMAGE, title="No image", print_exception=False)
    session.turnstile.enter(image)
    session.settle()  # the answer just stopped, if it is still winding down


def ask(engine: Backend, session: ImageSession, image: str | None, question: str, resolution: int,
        max_new_tokens: int, every_s: float = 0.05) -> Iterator[tuple]:
    """Stream one answer into the chat: yields (chat, metrics html, question box)."""
    if session.turnstile.superseded(image):  # withdrawn while in line by a new image: the new question holds
        yield gr.skip(), gr.skip(), gr.skip()  # the turnstile; this one must not run, restart the conversation to
        return  # its old image or touch the page (a generator that yields nothing clears its outputs in Gradio 6)
    ticket = session.turnstile.active
    try:
        if image is None:
            raise gr.Error(NO_IMAGE, title="No image", print_exception=False)
        keep_in_cache(image)
        if image != session.image:
            session.restart(image)
        conversation, history = session.conversation, tuple(session.history)
        q = question_or_default(question or "")
        request = Request(image, q, history, GenerationOptions(max_new_tokens=int(max_new_tokens)), int(resolution))
        part = Partial()
        yield messages(history, (q, "")), readout_html(metrics_text(part), "metrics"), ""
        try:
            for part in follow(engine.stream(request, cancel=session.turnstile.token), every_s):
                session.show(conversation, ticket, Turn(q, part.text))
                yield messages(history, (q, part.text)), readout_html(metrics_text(part), "metrics"), gr.skip()
        except gr.Error:
            yield messages(history), readout_html("", "metrics"), q
            raise
        except Exception as e:
            raise fail(e) from e
        finally:  # also on Stop: keep what was shown (unless the next question or a new conversation took over)
            session.settle(ticket)
    finally:
        session.turnstile.leave(ticket)


# -- layout ------------------------------------------------------------------------------------------
def build_image_tab(engine: Backend, settings: AppSettings) -> gr.Radio:
    """The tab; returns its resolution Radio, which `build_app` refreshes on page load."""
    info = engine.describe()
    configured = info["resolution"]
    session = gr.State(ImageSession(), delete_callback=lambda s: s.turnstile.release())  # a closed tab stops its answer
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            image = readable_uploads(gr.Image(type="filepath", image_mode=None, sources=["upload", "clipboard"],
                                              label="Image", height=340, elem_id="image-input"))
            resolution = gr.Radio(resolution_choices(configured, info.get("resolutions")), value=configured,
                                  label="Resolution",
                                  elem_id="image-resolution")
            max_tokens = gr.Slider(16, settings.max_new_tokens_limit, value=settings.max_new_tokens, step=16,
                                   label="Max new tokens", elem_id="image-max-tokens")
        with gr.Column(scale=3, min_width=320):
            chat = gr.Chatbot(label="Answer", height=360, elem_id="image-chat", buttons=["copy"],
                              feedback_options=None, placeholder="Upload an image, then ask about it.")
            metrics = gr.HTML(readout_html("", "metrics"), label="Metrics", elem_id="image-metrics")
            question = gr.Textbox(label="Question", placeholder=IMAGE_PRESETS[0], elem_id="image-question")
            preset_buttons(IMAGE_PRESETS, question)
            with gr.Row():
                submit = gr.Button("Submit", variant="primary", elem_id="image-submit")
                stop = gr.Button("Stop", variant="stop", elem_id="image-stop")
                restart = gr.Button("New conversation", elem_id="image-new")

    def prepare_upload(image, resolution):  # a broken upload fails here, as a toast, before any engine work
        prepare(engine, image, resolution)

    def answer(state, image, question, resolution, max_new_tokens):
        yield from ask(engine, state, image, question, resolution, max_new_tokens, settings.ui_update_s)

    inputs = [session, image, question, resolution, max_tokens]
    run = wire_answer([submit.click, question.submit], guard, answer, inputs, [chat, metrics, question], stop,
                      session, api_name="ask_image")
    restarts = {"api_visibility": "private", "cancels": [run], **INSTANT}  # the old conversation's answer stops
    for changed in (image.upload, image.clear):  # the session is reset before the new image is even read
        # "multiple": an image replaced while the last one is prepared is sent at once and takes over from it in
        # the engine (Gradio's default, "once", dropped it while the last one's prepare was still pending)
        changed(new_conversation, [session, image], [chat, metrics], show_progress="hidden", **restarts).then(
            prepare_upload, [image, resolution], None, show_progress="hidden", concurrency_id="prepare",
            concurrency_limit=None, trigger_mode="multiple", api_name="prepare_image")
    chat.clear(new_conversation, session, [chat, metrics], **restarts)
    restart.click(new_conversation, session, [chat, metrics], **restarts)
    return resolution
