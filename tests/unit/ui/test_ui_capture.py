"""The page opens every microphone with the app's capture constraints, set explicitly, not left to the browser."""

import json
import re

from tests.unit.ui.test_ui_voice import make_engine, make_models
from ui import AppSettings, create_app
from ui.voice.capture import capture_head, constraints, link_config


def test_the_constraints_follow_the_settings():
    assert constraints(AppSettings()) == {"echoCancellation": True, "noiseSuppression": False, "autoGainControl": False}
    off = AppSettings(voice_echo_cancellation=False, voice_noise_suppression=True, voice_auto_gain=True)
    assert constraints(off) == {"echoCancellation": False, "noiseSuppression": True, "autoGainControl": True}


def test_the_head_script_adds_them_to_every_audio_request():
    head = capture_head(AppSettings(voice_noise_suppression=True))
    want = json.loads(re.search(r"const want = (\{.*?\});", head).group(1))
    assert want == {"echoCancellation": True, "noiseSuppression": True, "autoGainControl": False}
    assert head.startswith("<script>") and "getUserMedia" in head and "constraints.audio" in head


def test_the_app_carries_the_head_for_launch(tmp_path):
    settings = AppSettings(voice_auto_gain=False)
    demo = create_app(make_engine(), settings, make_models(tmp_path))
    assert demo.page_head == capture_head(settings)


def test_the_line_is_told_its_frame_length_in_milliseconds():
    assert link_config(AppSettings(voice_chunk_s=0.04))["frameMs"] == 40
    assert link_config(AppSettings(voice_chunk_s=1))["frameMs"] == 1000
