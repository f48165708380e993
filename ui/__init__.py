"""The Gradio app: `create_app(engine, settings, speech)` builds it (tabs + queue), `launch` serves it; the engine
does all model work."""

from .app import create_app, launch
from .backend import Backend
from .blocks import build_app, launch_style
from .settings import AppSettings

__all__ = ["AppSettings", "Backend", "build_app", "create_app", "launch", "launch_style"]
