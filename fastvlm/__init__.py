"""FastVLM on CPU: an in-process streaming engine (ONNX Runtime vision + llama.cpp language model)."""

from .engine.config import EngineConfig, GenerationOptions
from .engine.events import (
    Busy,
    Done,
    Event,
    FirstToken,
    InputError,
    ModelFileError,
    Notice,
    Request,
    Result,
    Stats,
    TextDelta,
)
from .engine.prompt import Turn

__all__ = [
    "Busy", "Done", "EngineConfig", "Event", "FirstToken", "GenerationOptions", "InputError", "ModelFileError",
    "Notice", "Request", "Result", "Stats", "TextDelta", "Turn",
]
