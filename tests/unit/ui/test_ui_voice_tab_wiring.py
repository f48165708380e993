"""The voice tab's wiring and small handlers (ui/voice/tab.py): its answers share the engine's one-at-a-time
line with the other tabs and Stop skips the queue; Start answers at the judge's verdict and takes the frame at the
first sound; a stream with no frame keeps the last one; the status shows a dot unless ready."""

import threading
from dataclasses import replace

import gradio as gr
import numpy as np

from tests.unit.ui.test_ui_voice import SETTINGS, make_engine, make_models
from ui.voice.links import VoiceLinks
from ui.voice.session import VoiceSession
from ui.voice.tab import build_voice_tab, hint, open_line, remember, status_html


def test_voice_answers_run_one_at_a_time_with_every_tabs_and_stop_skips_the_queue(tmp_path):
    with gr.Blocks() as page:
        build_voice_tab(make_engine(), make_models(tmp_path), SETTINGS, VoiceLinks(SETTINGS), threading.Semaphore(2))
    fns = list(page.fns.values())
    engine = {i: f for i, f in page.fns.items() if f.concurrency_id == "engine"}
    assert len(engine) == 2 and {f.concurrency_limit for f in engine.values()} == {1}  # hands-free, push to talk
    assert next(f for f in fns if f.name == "stop").queue is False
    assert any(set(engine) <= set(f.cancels or ()) for f in fns)  # Stop cancels both


def test_start_answers_at_the_verdict_and_takes_the_frame_at_the_first_sound(tmp_path):
    session = VoiceSession()
    open_line(VoiceLinks(SETTINGS), make_models(tmp_path), session)
    assert session.taker.likely_events and session.taker.detector.onsets and session.phase == "listening"


def test_a_camera_update_without_a_frame_keeps_the_last_one():
    session, frame = VoiceSession(), np.zeros((4, 4, 3), np.uint8)
    remember(session, frame)
    remember(session, None)
    assert session.frame is frame


def test_the_status_shows_a_dot_except_when_ready():
    assert "dot" not in status_html("ready") and '<span class="dot">●</span>' in status_html("listening")


def test_the_tab_says_what_can_be_said_over_an_answer_when_it_listens_then(tmp_path):
    with gr.Blocks() as page:
        build_voice_tab(make_engine(), make_models(tmp_path), SETTINGS, VoiceLinks(SETTINGS), threading.Semaphore(2))
    said = [b.value for b in page.blocks.values() if getattr(b, "elem_id", None) == "voice-hint"]
    assert said == ["Talk over an answer to ask something else, or say “stop” to stop it."]
    assert hint(replace(SETTINGS, voice_stop_phrases=())) == "Talk over an answer to ask something else."
    assert hint(replace(SETTINGS, voice_barge_in=False)) == ""  # deaf while it speaks: nothing to say over it
