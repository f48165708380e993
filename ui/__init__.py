"""The Gradio app: `build_app(engine, settings)` lays out the tabs; the engine does all model work."""

from .backend import Backend
from .blocks import build_app, launch_style
from .settings import AppSettings

__all__ = ["AppSettings", "Backend", "build_app", "launch_style"]
