"""How the page opens the microphone: the browser's echo cancellation, noise suppression and gain control, set
explicitly. Gradio asks for `getUserMedia({audio: true})`, which leaves all three to the browser (all on in
Chromium and Firefox); the script in the page's head adds the app's choices (`AppSettings.voice_*`) to every
audio request.
`window.__fvCapture` holds the last microphone track (its `getSettings()` says what the browser applied)."""

from __future__ import annotations

import json

from ..settings import AppSettings

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


def capture_head(settings: AppSettings) -> str:
    """The `<script>` for the page's head that opens every microphone with `constraints(settings)`."""
    return _SCRIPT % json.dumps(constraints(settings))
