"""The echo walk's room needs PulseAudio's tools, and its server only when none (PulseAudio's or PipeWire's) runs."""

from __future__ import annotations

import pytest

from fastvlm.bench.browser import echo


@pytest.mark.parametrize("installed, running, missing", [
    (set(), False, "pulseaudio, pactl, paplay"),
    ({"pactl", "paplay"}, False, "pulseaudio"),  # nothing runs and nothing can start a server
    ({"pactl", "paplay"}, True, None),  # a server runs (PipeWire's pulse, say): no pulseaudio binary needed
    ({"pulseaudio", "pactl"}, True, "paplay"),
    ({"pulseaudio", "pactl", "paplay"}, False, None),
])
def test_the_room_says_which_tool_is_missing_and_how_to_install_it(monkeypatch, installed, running, missing):
    monkeypatch.setattr(echo.shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool in installed else None)
    monkeypatch.setattr(echo, "_running", lambda: running)
    if missing is None:
        echo.check()
        return
    with pytest.raises(echo.RoomUnavailable) as e:
        echo.check()
    assert f"({missing} not found)" in str(e.value) and echo.INSTALL in str(e.value)
