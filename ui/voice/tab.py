"""The Voice + camera tab: ask out loud about what the camera sees, and hear the answer.

Hands-free: Start turns on the webcam and the microphone, which streams short chunks to this person's
`TurnDetector`. When speech starts, the current frame is prepared (encoded and prefilled) while the person
talks; when it ends, Whisper transcribes it and the answer streams, each finished sentence spoken at once.
Push to talk: record, stop, same pipeline. Listening is `session.py`, a turn is `turn.py` (its sound
`playing.py`); this file lays the tab out and turns their events (`events.py`) into page updates (see docs/voice.md).
"""

from __future__ import annotations

import html
import logging
import threading
import time
from collections.abc import Iterator

import gradio as gr
import numpy as np

from fastvlm.engine.events import InputError

from ..backend import Backend
from ..settings import AppSettings
from ..inputs import Refused, bounded_frames, bounded_recordings
from ..widgets import INSTANT, by_component, fail, ms, readout_html, toast_text
from .links import VoiceLinks
from .listening import record
from .prepare import prepare, prepare_turns
from .models import SpeechModels, VoiceUnavailable
from .page import CAMERA_ON_JS, LINE_JS, STATUS_CSS, STOP_JS
from .session import TurnTimes, VoiceSession
from .events import Answering, Heard, NotHeard, PlaysOn, Said, SayAgain, Silent, StopSaid, VoiceEvent
from .playing import speak_rest
from .turn import answer_turn

log = logging.getLogger(__name__)

PHASES = {
    "ready": "Press Start and ask out loud about what the camera sees, or use Push to talk.",
    "listening": "Listening: ask a question",
    "hearing": "Hearing you…",
    "thinking": "Thinking…",
    "speaking": "Speaking",
}
NO_MIC = ("No sound is arriving from the microphone: allow microphone access for this page (the icon in the "
          "address bar), then press Start again.")
NO_RECORDING = "The recording is empty: allow the microphone, record your question, then press stop."


def status_html(phase: str) -> str:
    dot = "" if phase == "ready" else '<span class="dot">●</span>'
    return f'<div class="voice-status {phase}">{dot}{html.escape(PHASES[phase])}</div>'


def voice_html(text: str) -> str:
    return f'<div class="voice-engine">{html.escape(text)}</div>'


def readout(times: TurnTimes) -> str:
    """The line under the answer: how long hearing, the first token and the first sound took."""
    def show(value):
        return "…" if value is None else ms(value)

    return readout_html(f"STT {show(times.stt_s)} · TTFT {show(times.ttft_s)} · first sound "
                        f"{show(times.first_sound_s)} after you stopped", "metrics")


def _idle(session: VoiceSession) -> str:
    return "listening" if session.listening else "ready"


# -- handlers ------------------------------------------------------------------------------------------------------
def remember(session: VoiceSession, frame: np.ndarray | None) -> None:
    if frame is not None:
        session.frame = frame


def speech_started(session: VoiceSession) -> str | dict:
    """The line heard a question start (link.js clicked #voice-heard-start): say so. (The line itself has the
    frame prepared: `VoiceLinks(prepare=...)`.)"""
    return status_html("hearing") if session.listening and session.phase == "hearing" else gr.skip()


def push_to_talk_started(session: VoiceSession) -> tuple:
    session.interrupt(drop_held=True)  # a sound held over speech too: this is a question
    session.question_frame, session.starts = session.frame, session.starts + 1
    session.phase = "hearing"
    return session.starts, status_html("hearing")


def push_to_talk_stopped(session: VoiceSession, audio) -> tuple:
    if audio is None:
        gr.Warning(NO_RECORDING, title="Nothing recorded")
        session.phase = _idle(session)
        return gr.skip(), status_html(session.phase)
    try:
        if isinstance(audio, Refused):  # not decoded (ui/inputs.py)
            raise InputError(audio.reason)
        record(session, audio[0], audio[1])
    except InputError as e:
        gr.Warning(toast_text(e), title="This recording cannot be used")
        session.phase = _idle(session)
        return gr.skip(), status_html(session.phase)
    session.phase = "thinking"
    return session.questions, status_html("thinking")


def answer(engine: Backend, models: SpeechModels, session: VoiceSession, settings: AppSettings) -> Iterator[dict]:
    """Updates by output name (transcript, answer, readout, voice, speaker, status) as the turn goes on."""
    try:
        yield from _show(answer_turn(engine, models, session, settings), session)
    except gr.Error:
        session.phase = _idle(session)
        raise
    except Exception as e:
        session.phase = _idle(session)
        raise fail(e) from e


def speak(session: VoiceSession, settings: AppSettings) -> Iterator[dict]:
    """The sentences still unspoken when the answer ended, then back to listening once the last one has played."""
    turn = session.turn
    yield from _show(speak_rest(session, settings), session)
    if session.phase == "speaking":
        while session.turn == turn and time.monotonic() < session.playing_until:  # a new question ends the wait
            time.sleep(0.05)
        if session.turn == turn and session.phase == "speaking":
            session.phase = _idle(session)
            yield {"status": status_html(session.phase)}


def stop(session: VoiceSession) -> tuple:
    session.stop()
    session.phase = "ready"
    return status_html("ready"), None


def check_microphone(session: VoiceSession, wait_s: float) -> None:
    """After Start: no microphone audio has arrived, or the server refused the page's line (it says why)."""
    time.sleep(wait_s)
    if session.listening and session.chunks == 0 and session.line_refused:
        gr.Warning(f"Hands-free voice could not start: {session.line_refused}.", title="No voice line")
    elif session.listening and session.chunks == 0:
        gr.Warning(NO_MIC, title="No microphone")


def _show(events: Iterator[VoiceEvent], session: VoiceSession) -> Iterator[dict]:
    """Turn events -> page updates by output name (transcript, answer, readout, voice, speaker, status)."""
    for ev in events:
        if isinstance(ev, Heard):
            for notice in filter(None, (ev.notice, ev.transcript.notice)):
                gr.Info(notice)
            session.phase = "thinking"
            yield {"transcript": ev.transcript.text, "answer": "", "readout": readout(session.times),
                   "status": status_html("thinking"), "voice": voice_html("")}
        elif isinstance(ev, NotHeard):
            gr.Warning(toast_text(ev.message), title="Nothing asked")
            session.phase = _idle(session)
            yield {"status": status_html(session.phase)}
        elif isinstance(ev, PlaysOn):  # the answer that was stopped goes on; no toast over it
            log.info("speech over the answer had no words (%s): it goes on", ev.message)
            session.phase = "speaking" if ev.sounding else "thinking"
            yield {"status": status_html(session.phase)}
        elif isinstance(ev, StopSaid):  # the answer stays where it stopped; nothing was asked
            session.phase = _idle(session)
            yield {"transcript": ev.text, "status": status_html(session.phase)}
        elif isinstance(ev, SayAgain):  # the answer shown is the one said again
            session.phase = "thinking"
            yield {"transcript": ev.text, "status": status_html("thinking"), "readout": readout(session.times)}
        elif isinstance(ev, Answering):
            yield {"answer": ev.part.text, "readout": readout(session.times)}
        elif isinstance(ev, Said):
            session.phase = "speaking"
            line = f"Voice: {ev.speech.engine} ({ev.speech.voice})"
            if ev.speech.notice:
                line += f" · {ev.speech.notice}"
            update = {"voice": voice_html(line), "status": status_html("speaking"), "readout": readout(session.times)}
            yield update if ev.streamed else update | {"speaker": str(ev.speech.path)}
        elif isinstance(ev, Silent):
            if not session.warned_silent:
                session.warned_silent = True
                gr.Warning(toast_text(ev.reason), title="No sound")
            yield {"voice": voice_html(f"No sound: {ev.reason}")}


def open_line(links: VoiceLinks, models: SpeechModels, session: VoiceSession, early_ms: int = 300) -> tuple:
    """Start: listening begins; the page gets the token its voice line connects with (link.js, `LINE_JS`)."""
    session.listen(models.turn_taker(early_ms, likely_events=True, onsets=True))  # answered at the verdict
    session.phase = "listening"
    return links.issue(session), status_html("listening")


def line_opened(links: VoiceLinks, token: str, failure: str) -> str | None:
    """The page says whether its microphone and line opened (`failure`: why not)."""
    session = links.session(token)
    if not failure or session is None:
        return gr.skip()
    session.stop()
    session.phase = "ready"
    gr.Warning(f"The microphone could not be opened for hands-free voice: {failure}. Allow the microphone for "
               "this page (the icon in the address bar) and press Start again, or use Push to talk.",
               title="No microphone")
    return status_html("ready")


# -- layout ----------------------------------------------------------------------------------------------------
_HIDDEN = {"show_progress": "hidden", "api_visibility": "private"}
_ENGINE = {"concurrency_id": "engine", "concurrency_limit": 1, **_HIDDEN}  # answers: one at a time, app-wide


def build_voice_tab(engine: Backend, speech: SpeechModels | VoiceUnavailable, settings: AppSettings,
                    links: VoiceLinks, decodes: threading.Semaphore) -> None:
    """The tab; hands-free audio travels over `links` (the page's voice line, served beside the app); its camera's
    frames are decoded holding one of `decodes` (the app's webcams share them)."""
    if isinstance(speech, VoiceUnavailable):
        gr.Markdown(f"**Voice is unavailable:** {html.escape(speech.reason)}\n\nThe other tabs work as usual.",
                    elem_id="voice-unavailable")
        return

    def forget(state: VoiceSession) -> None:  # gr.State's delete callback: the person left
        links.revoke(state.link_token)
        state.close()

    session = gr.State(VoiceSession(), delete_callback=forget)
    ui = _layout(speech.about, decodes, settings.voice_max_recording_s, hint(settings))
    outputs = {name: ui[name] for name in ("transcript", "answer", "readout", "voice", "speaker", "status")}
    rest = {k: outputs[k] for k in ("voice", "speaker", "status", "readout")}  # what speaking the rest updates

    def on_answer(state):
        yield from by_component(answer(engine, speech, state, settings), outputs)

    def on_speak(state):
        yield from by_component(speak(state, settings), rest)

    ui["camera"].stream(remember, [session, ui["camera"]], None, stream_every=settings.frame_every_s,
                        concurrency_id="frames", concurrency_limit=None, **_HIDDEN)
    line_answer = _hands_free(ui, session, links, speech, settings, on_answer, list(outputs.values()))
    ptt_answer = _push_to_talk(ui, session, engine, settings, on_answer, list(outputs.values()))
    for answering in (line_answer, ptt_answer):  # "multiple": the turn before may still be waiting to end
        answering.then(on_speak, session, list(rest.values()), trigger_mode="multiple", concurrency_id="voice-speak",
                       concurrency_limit=None, **_HIDDEN)
        answering.then(lambda state: prepare_turns(engine, state, settings.camera_resolution,
                                                   settings.voice_history_turns), session, None,
                       trigger_mode="always_last", concurrency_id="prepare", concurrency_limit=None, **_HIDDEN)
    ui["stop"].click(stop, session, [ui["status"], ui["speaker"]], js=STOP_JS, cancels=[line_answer, ptt_answer],
                     queue=False, **_HIDDEN)


def _hands_free(ui: dict, session, links: VoiceLinks, speech: SpeechModels, settings: AppSettings, on_answer,
                outputs: list):
    """Start opens the camera, issues the line's token, the page opens its microphone and line; the line clicks
    the hidden buttons when it hears a question start and end. Returns the answering event."""
    status, token = ui["status"], ui["token"]
    started = ui["start"].click(lambda state: open_line(links, speech, state, settings.voice_early_stt_ms), session,
                                [token, status], js=CAMERA_ON_JS, **INSTANT, **_HIDDEN)
    started.then(lambda key, failure: line_opened(links, key, failure), [token, ui["failure"]], status, js=LINE_JS,
                 **INSTANT, **_HIDDEN)
    started.then(lambda state: check_microphone(state, settings.voice_mic_check_s), session, None,
                 concurrency_id="voice-check", concurrency_limit=None, **_HIDDEN)
    ui["heard_start"].click(speech_started, session, status, trigger_mode="always_last", **INSTANT, **_HIDDEN)
    return ui["heard_end"].click(on_answer, session, outputs, trigger_mode="always_last", **_ENGINE)


def _push_to_talk(ui: dict, session, engine: Backend, settings: AppSettings, on_answer, outputs: list):
    """A recording is the same turn: its start prepares the frame, its stop asks. Returns the answering event."""
    starts, questions = gr.State(0), gr.State(0)  # bumped by push to talk: prepare the frame, answer
    ptt, status = ui["ptt"], ui["status"]
    ptt.start_recording(push_to_talk_started, session, [starts, status], js=CAMERA_ON_JS, **INSTANT, **_HIDDEN)
    ptt.stop_recording(push_to_talk_stopped, [session, ptt], [questions, status], **INSTANT, **_HIDDEN)
    turns = settings.voice_history_turns
    starts.change(lambda state: prepare(engine, state, settings.camera_resolution, turns=turns), session, None,
                  trigger_mode="always_last", concurrency_id="prepare", concurrency_limit=None, **_HIDDEN)
    return questions.change(on_answer, session, outputs, trigger_mode="always_last", **_ENGINE)


def hint(settings: AppSettings) -> str:
    """What a person can say over a spoken answer, under Start (nothing when the tab is deaf while it speaks)."""
    if not settings.voice_barge_in:
        return ""
    stop = ", or say “stop” to stop it" if "stop" in settings.voice_stop_phrases else ""
    return f"Talk over an answer to ask something else{stop}."


def _layout(about: str, decodes: threading.Semaphore, max_recording_s: float, said_over: str) -> dict:
    """Camera, Start/Stop, the two microphones on the left; what was heard, said and how fast on the right."""
    ui = {}
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            ui["camera"] = bounded_frames(gr.Image(sources=["webcam"], streaming=True, type="numpy", label="Camera",
                                                   height=280, webcam_options=gr.WebcamOptions(mirror=False),
                                                   elem_id="voice-camera"), decodes)
            with gr.Row():
                ui["start"] = gr.Button("Start hands-free", variant="primary", elem_id="voice-start")
                ui["stop"] = gr.Button("Stop", variant="stop", elem_id="voice-stop")
            if said_over:
                gr.Markdown(said_over, elem_id="voice-hint")
            # the page's voice line (link.js) clicks these when it hears a question start and end
            ui["heard_start"] = gr.Button("heard: start", visible="hidden", elem_id="voice-heard-start")
            ui["heard_end"] = gr.Button("heard: end", visible="hidden", elem_id="voice-heard-end")
            ui["token"] = gr.Textbox(visible="hidden", elem_id="voice-token")  # the line's key, from Start
            ui["failure"] = gr.Textbox(visible="hidden", elem_id="voice-line-failure")  # why it did not open
            ui["ptt"] = bounded_recordings(gr.Audio(sources=["microphone"], type="numpy", elem_id="voice-ptt",
                                                    label="Push to talk: record, then stop"), max_recording_s)
        with gr.Column(scale=3, min_width=320):
            ui["status"] = gr.HTML(status_html("ready"), css_template=STATUS_CSS, elem_id="voice-status")
            ui["transcript"] = gr.Textbox(label="You asked", interactive=False, elem_id="voice-transcript")
            ui["answer"] = gr.Textbox(label="Answer", lines=5, max_lines=12, interactive=False, buttons=["copy"],
                                      elem_id="voice-answer")
            ui["readout"] = gr.HTML(readout(TurnTimes()), elem_id="voice-readout")
            ui["speaker"] = gr.Audio(type="filepath", autoplay=True, interactive=False, label="Spoken answer",
                                     elem_id="voice-speaker")
            ui["voice"] = gr.HTML(voice_html(about), css_template=STATUS_CSS, elem_id="voice-engine")
    return ui
