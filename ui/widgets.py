"""Pieces every tab shares: presets, the metrics and TTFT readouts, the fold from engine events to
page updates, the one-answer-at-a-time guard, and an image input whose bad uploads say what to do."""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gradio as gr

from fastvlm.engine.cancel import CancelToken
from fastvlm.engine.events import Busy, Done, Event, FirstToken, InputError, ModelFileError, Notice, Stats, TextDelta

from .readahead import ReadAhead

log = logging.getLogger(__name__)

CSS_PATH = Path(__file__).resolve().parents[1] / "assets" / "app.css"

IMAGE_PRESETS = ("Describe the image.", "Read all the text.", "What is unusual here?", "How many people are there?")
SNAPSHOT_PRESETS = ("What am I holding?", "What am I doing?", "Is there any text visible?", "Describe briefly.")
LIVE_PRESETS = ("Describe briefly.", "What am I holding?", "What am I doing?", "Is there any text visible?")

STILL_ANSWERING = "Still answering your last question: wait for it, or press Stop."
BUSY = "The model is answering other requests: try again in a moment"
ENGINE_FAILED = "The model failed on this request (details are in the server log). Try again or another image."


# -- readouts -------------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    """'640 ms' below ten seconds, '12.3 s' above."""
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def format_metrics(stats: Stats) -> str:
    """The line under an answer: 'TTFT 640 ms · encode 120 ms · prefill 200 ms · 25.3 tok/s · 48 tokens'."""
    if stats.stop_reason == "cancelled" and not stats.new_tokens:
        return f"stopped before the first token · {ms(stats.total_s)}"
    encode = "cached" if stats.embedding_cached else ms(stats.encode_s)
    prefill = ms(stats.prefill_s)
    if stats.reused_tokens:
        prefill += f" ({stats.reused_tokens} reused)"
    return (f"TTFT {ms(stats.ttft_s)} · encode {encode} · prefill {prefill} · "
            f"{stats.tokens_per_s:.1f} tok/s · {stats.new_tokens} tokens")


def format_ttft(ttft_s: float | None, total_s: float | None = None) -> str:
    """The big readout: 'TTFT 640 ms · total 2.1 s' ('…' while a value is still coming)."""
    ttft = "…" if ttft_s is None else ms(ttft_s)
    total = "…" if total_s is None else f"{total_s * 1000:.0f} ms" if total_s < 1 else f"{total_s:.1f} s"
    return f"TTFT {ttft} · total {total}"


def readout_html(text: str, kind: str) -> str:
    """A readout as HTML: `kind` picks the CSS class (metrics, ttft, counter)."""
    return f'<div class="readout readout-{kind}">{html.escape(text)}</div>'


# -- engine events -> page updates ----------------------------------------------------------------
@dataclass(frozen=True)
class Partial:
    """The answer so far."""

    text: str = ""
    ttft_s: float | None = None
    stats: Stats | None = None  # set once, at the end


def follow(events: Iterator[Event], every_s: float = 0.05, clock: Callable[[], float] = time.monotonic,
           cancel: CancelToken | None = None, read_ahead: bool = False) -> Iterator[Partial]:
    """Fold an engine stream into the answer so far, at most one update per `every_s`; the first text (with the
    time to first token) and the end always show at once. `read_ahead` (the voice tab): the stream is read in a
    thread of its own (`ReadAhead`), so decoding goes on while the page is updated, and text that has already
    arrived goes in one update. Notices become `gr.Info`, `InputError` a `gr.Error`; `Busy` propagates to the
    caller. Closing this generator stops the stream (at once through `cancel`, the token it was made with, when
    read ahead) and frees the engine."""
    part, last = Partial(), float("-inf")
    ahead = ReadAhead(events, cancel) if read_ahead else None
    try:
        for ev in ahead if ahead is not None else events:
            if isinstance(ev, Notice):
                gr.Info(ev.message)
                continue
            if isinstance(ev, TextDelta):
                first = not part.text
                part = replace(part, text=part.text + ev.text)
                if not first and (clock() - last < every_s or (ahead is not None and ahead.waiting)):
                    continue
            elif isinstance(ev, FirstToken):  # shown with the first text: one page update, not an empty one
                part = replace(part, ttft_s=ev.ttft_s)
                continue
            elif isinstance(ev, Done):
                part = replace(part, stats=ev.stats)
            last = clock()
            yield part
    except InputError as e:
        raise gr.Error(toast_text(e), title="This image cannot be used", print_exception=False) from e
    finally:
        close = ahead.close if ahead is not None else getattr(events, "close", None)
        if close is not None:
            close()


def toast_text(error: Exception) -> str:
    """An error's message for a toast, which renders HTML: escaped, since it may quote an uploaded file's name."""
    return html.escape(str(error))


def fail(error: Exception) -> gr.Error:
    """What a page shows when an answer fails: a busy engine (a remote backend's 503) or a request it cannot
    answer (e.g. an image too large for the context) say so; anything else is unexpected, logged in full."""
    if isinstance(error, Busy):
        return gr.Error(f"{BUSY} ({toast_text(error)})", title="Busy", print_exception=False)
    if isinstance(error, InputError):
        return gr.Error(toast_text(error), title="This request cannot be answered", print_exception=False)
    if isinstance(error, ModelFileError):  # the model did not load (its message names the file and the fix)
        return gr.Error(toast_text(error), title="The model is not loaded", print_exception=False)
    log.error("answer failed", exc_info=error)
    return gr.Error(ENGINE_FAILED)


# Quick handlers that never touch the engine. They still go through the queue: Gradio 6's page shows the
# gr.Error of an unqueued (queue=False) event as nothing at all, only a failed request in the console.
INSTANT = {"concurrency_id": "instant", "concurrency_limit": None}


def by_component(updates: Iterable[dict[str, Any]], components: dict[str, Any]) -> Iterator[dict]:
    """A generator handler's updates by output name -> by component. Never none at all: Gradio 6 clears every
    output of a generator that yields nothing, so a handler with nothing to show sends gr.skip() for each."""
    sent = False
    for update in updates:
        sent = True
        yield {components[name]: value for name, value in update.items()}
    if not sent:
        yield {component: gr.skip() for component in components.values()}


# -- one answer at a time per person ------------------------------------------------------------------
@dataclass
class Turnstile:
    """Lets one answer per person run; lives inside that person's `gr.State` object."""

    active: int = 0  # ticket of the running answer, 0 when none
    issued: int = 0
    token: CancelToken | None = None  # stops the running answer's encode/prefill/decode (Stop, a closed tab)
    subject: Any = None  # what the admitted question is about (the Image tab's image)

    def enter(self, subject: Any = None) -> None:
        """Called by the instant guard on Submit: a second click while answering is refused in the page. A
        question about another subject (the image was replaced; its Submit may reach the server before the
        upload's own event) withdraws the answer running or in line instead."""
        if self.active and subject == self.subject:
            raise gr.Error(STILL_ANSWERING, title="Busy", print_exception=False)
        if self.active:
            self.release()
        self.issued += 1
        self.active = self.issued
        self.token = CancelToken()
        self.subject = subject

    def superseded(self, subject: Any) -> bool:
        """An answer about to run was asked about `subject`, but the question let in now is about another: it
        was withdrawn while in line (a new image restarted the conversation), so it must not run."""
        return bool(self.active) and subject != self.subject

    def leave(self, ticket: int) -> None:
        if self.active == ticket:
            self.active = 0

    def release(self) -> None:
        """Stop pressed (or the tab closed): the running answer stops within a prefill chunk or an encode
        kernel, and the next Submit may start at once."""
        self.active = 0
        if self.token is not None:
            self.token.cancel()


def wire_answer(triggers: Sequence, guard: Callable, answer: Callable, inputs: list, outputs: list,
                stop: gr.Button, state: gr.State, api_name: str):
    """triggers -> `guard` (instant, never waits; refuses with gr.Error) -> `answer` (one answer at a time across
    the app, so waiting people see their place in line). `stop` cancels the answer and frees the engine.

    The guard, not the page, decides whether a question gets in: `answer` takes trigger_mode="multiple", since
    Gradio's default ("once") makes the page silently drop it while the answer just stopped (Stop, a new image)
    is still winding down, leaving the admitted question unanswered and the person's turn held."""
    run = gr.on(triggers, guard, inputs, None, show_progress="hidden", api_visibility="private", **INSTANT).success(
        answer, inputs, outputs, concurrency_id="engine", concurrency_limit=1, show_progress="minimal",
        trigger_mode="multiple", api_name=api_name)
    stop.click(_release, state, None, cancels=[run], queue=False, show_progress="hidden", api_visibility="private")
    return run


def _release(session) -> None:
    session.turnstile.release()


def preset_buttons(presets: Sequence[str], target: gr.Textbox) -> None:
    """Small buttons that put a preset question into `target` (in the browser, no server round trip)."""
    with gr.Row(elem_classes="presets"):
        for text in presets:
            gr.Button(text, size="sm", variant="secondary", min_width=60).click(
                None, None, target, js=f"() => {json.dumps(text)}", queue=False)


# -- header -----------------------------------------------------------------------------------------
def header_markdown(info: dict, title: str) -> str:
    """Which model files are loaded, resolution, threads, and the licence note."""
    files = " + ".join(f"`{Path(info[k]).name}`" for k in ("vision", "llm") if info.get(k))
    lines = [
        f"## {title}",
        (f"{info.get('model') or 'model'}: {files} · {info.get('resolution')} px · "
        f"{info.get('threads')} threads · context {info.get('n_ctx')} · FastVLM weights: Apple AMLR licence"),
    ]
    sources = info.get("sources") or {}
    if sources:
        lines.append("<small>" + " · ".join(f"{part}: {html.escape(where)}" for part, where in sources.items()) +
                     (f" · vision runtime: {html.escape(info['vision_runtime'])}" if info.get("vision_runtime") else "")
                     + (f" · {html.escape(info['vision_precision'])}" if info.get("vision_precision") else "")
                     + "</small>")
    if info.get("synthetic"):
        lines.append("**⚠ synthetic weights: answers are gibberish** (random-weight test models)")
    if info.get("llama_notice"):
        lines.append(f"**⚠ {html.escape(info['llama_notice'])}**")
    state = info.get("state", "ready")
    if state == "loading":
        stage = html.escape(info.get("stage") or "loading the model and warming up")
        lines.append(f"⏳ *{stage}…* (questions asked now wait for it)")
    elif state == "failed":
        lines.append(f"**✖ the model could not be loaded:** {html.escape(info.get('error', ''))}")
    return "\n\n".join(lines)
