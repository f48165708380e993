"""How the page opens the microphone: the browser's echo cancellation, noise suppression and gain control, set
explicitly, and the voice line's script (link.js). Gradio's push-to-talk asks for `getUserMedia({audio: true})`,
which leaves all three to the browser (all on in Chromium and Firefox); the first script in the page's head adds
the app's choices (`AppSettings.voice_*`) to every audio request, the line's own included.
`window.__fvCapture` holds the last microphone track (its `getSettings()` says what the browser applied)."""

from __future__ import annotations

import json
from pathlib import Path

from ..settings import AppSettings

LINK_JS = Path(__file__).with_name("link.js")

_SCRIPT = """<script>
(() => {
  const want = %s;
  const md = navigator.mediaDevices;
  if (!md || !md.getUserMedia) return;
  const open = md.getUserMedia.bind(md);
  md.getUserMedia = async (constraints) => {
    if (!constraints || !constraints.audio) return open(constraints);
    const audio = Object.assign(constraints.audio === true ? {} : {...constraints.audio}, want);
    const stream = await open({...constraints, audio});
    window.__fvCapture = stream.getAudioTracks()[0] || null;
    return stream;
  };
})();
</script>"""


def constraints(settings: AppSettings) -> dict[str, bool]:
    """The MediaTrackConstraints every microphone of the page is opened with."""
    return {"echoCancellation": settings.voice_echo_cancellation,
            "noiseSuppression": settings.voice_noise_suppression,
            "autoGainControl": settings.voice_auto_gain}


def link_config(settings: AppSettings) -> dict:
    """What the page's voice line needs to know (`CONFIG` in link.js)."""
    return {"constraints": constraints(settings), "frameMs": round(settings.voice_chunk_s * 1000),
            "gapS": settings.voice_sentence_gap_s, "path": "voice/link"}


def capture_head(settings: AppSettings) -> str:
    """The `<script>`s for the page's head: every microphone opened with `constraints(settings)`; the voice line."""
    link = LINK_JS.read_text().replace("__CONFIG__", json.dumps(link_config(settings)))
    return _SCRIPT % json.dumps(constraints(settings)) + f"\n<script>\n{link}</script>"
