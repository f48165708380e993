"""The Voice + camera tab: ask out loud about what the camera sees, and hear the answer.

`tab` lays the tab out and turns events into page updates (`page`: its scripts and style in the browser);
`session` is one person's listening state and the speech models everyone shares; `turn` answers one question and
speaks it; `speech_queue` synthesizes an answer's sentences in order; `capture` sets how the page opens the
microphone; `link` is the page's own audio line (microphone in, spoken answer out, one WebSocket; its page side is
link.js), `links` every person's line and the route they open; `prepare` readies the question's frame and words as
it is spoken. See docs/voice.md."""

from .capture import capture_head
from .links import VoiceLinks
from .prepare import prepare as prepare_frame
from .models import SpeechModels, VoiceUnavailable
from .tab import build_voice_tab

__all__ = ["SpeechModels", "VoiceLinks", "VoiceUnavailable", "build_voice_tab", "capture_head", "prepare_frame"]
