"""The core, image to answer: preprocess -> vision -> plan/prompt -> lm -> typed events, driven by `Engine`.

Imports nothing from the other `fastvlm` packages; everything else stands on it. Exports the engine and its types.
"""

from .config import EngineConfig, GenerationOptions
from .engine import Engine
from .events import (
    Busy, Done, Event, FirstToken, InputError, ModelFileError, Notice, Request, Result, Stats, TextDelta,
)
from .prompt import Turn

__all__ = [
    "Busy", "Done", "Engine", "EngineConfig", "Event", "FirstToken", "GenerationOptions", "InputError",
    "ModelFileError", "Notice", "Request", "Result", "Stats", "TextDelta", "Turn",
]
