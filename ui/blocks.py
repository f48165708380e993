"""The Blocks layout: a header saying what is loaded, then the tabs.

Tab order: Image, Camera snapshot, Voice + camera (when speech is on), Live.
"""

from __future__ import annotations

import threading

import gradio as gr

from .backend import Backend
from .cache import CacheSweeper
from .settings import AppSettings
from .tab_image import build_image_tab, resolution_radio
from .tab_live import build_live_tab
from .tab_snapshot import build_snapshot_tab
from .voice import VoiceLinks, build_voice_tab, capture_head, prepare_frame
from .widgets import CSS_PATH, header_markdown


def build_app(engine: Backend, settings: AppSettings | None = None, speech=None, api=None) -> gr.Blocks:
    """The whole app; no engine work happens here. Style for `launch()` comes from `launch_style()`.
    `speech`: `ui.voice.SpeechModels`, or `VoiceUnavailable` (the tab says why), or None (no voice tab).
    `api`: the API's `ApiSettings`, whose proxies the voice lines believe as the API does (`VoiceLinks.client`)."""
    settings = settings or AppSettings()
    # the voice tab's audio lines, served beside the page; each prepares its question's frame as it is spoken
    links = VoiceLinks(settings, prepare=lambda session, start_s, words="": prepare_frame(
        engine, session, settings.camera_resolution, start_s, words, settings.voice_history_turns), api=api)
    decodes = threading.BoundedSemaphore(settings.max_frame_decodes)  # the webcams' frames decoded at once
    with gr.Blocks(title=settings.title, analytics_enabled=False) as demo:
        info = engine.describe()
        header = gr.Markdown(header_markdown(info, settings.title), elem_id="header")
        with gr.Tabs():
            with gr.Tab("Image", id="image", elem_id="tab-image"):
                resolution = build_image_tab(engine, settings)
            with gr.Tab("Camera snapshot", id="snapshot", elem_id="tab-snapshot"):
                build_snapshot_tab(engine, settings, decodes)
            if speech is not None:
                with gr.Tab("Voice + camera", id="voice", elem_id="tab-voice"):
                    build_voice_tab(engine, speech, settings, links, decodes)
            with gr.Tab("Live", id="live", elem_id="tab-live"):
                build_live_tab(engine, settings, decodes)
        demo.load(lambda: resolution_radio(engine.describe()), None, resolution, queue=False, show_progress="hidden",
                  api_visibility="private")
        _refresh_while_loading(engine, settings, header, resolution, loading=info.get("state") == "loading")
        _free_closed_sessions(demo)
    demo.cache_sweeper = CacheSweeper(demo, settings.cache_sweep_s, settings.cache_max_age_s,  # app.launch starts it
                                      settings.cache_max_bytes or None)
    demo.page_head = capture_head(settings)  # how the microphones are opened; app.launch puts it in the page
    demo.voice_links = links
    demo.extra_routes = [links.route()] if speech is not None else []  # app.launch serves them
    return demo


def _free_closed_sessions(demo: gr.Blocks) -> None:
    """Each person's session objects are written once as their page loads. Gradio frees a state an hour after
    its page closed, running its `delete_callback` (the answer stops, the voice line closes), only once a handler
    has written it; the tabs' handlers change their sessions in place, so they were never freed (nor the Live
    tab's last frame)."""
    sessions = [block for block in demo.blocks.values()
                if isinstance(block, gr.State) and not isinstance(block.value, (int, float, str, bool, type(None)))]
    demo.load(_keep_sessions, sessions, sessions, queue=False, show_progress="hidden", api_visibility="private")


def _keep_sessions(*sessions):
    return sessions if len(sessions) > 1 else sessions[0]


def _refresh_while_loading(engine: Backend, settings: AppSettings, header: gr.Markdown, resolution: gr.Radio,
                           loading: bool) -> None:
    """While the model loads in the background, update the header every second until it is ready, and then the
    resolution Radio to the sizes the loaded model serves (a page opened during the load kept the sizes it
    opened with)."""
    timer = gr.Timer(1.0, active=loading)

    def refresh():
        info = engine.describe()
        done = info.get("state", "ready") != "loading"
        return (header_markdown(info, settings.title), gr.Timer(active=not done),
                resolution_radio(info) if done else gr.skip())

    timer.tick(refresh, outputs=[header, timer, resolution], show_progress="hidden", queue=False)


def launch_style() -> dict:
    """Theme and CSS, which Gradio 6 takes in `launch()` rather than `Blocks()`."""
    return {"theme": gr.themes.Soft(primary_hue="blue"), "css_paths": [CSS_PATH]}
