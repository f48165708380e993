"""Where the model files come from: published sources, the Hugging Face cache and downloads, local folders.

The engine only ever receives two paths; everything about finding them lives here.
"""

from .hub import Hub, HubUnreachable
from .resolve import ModelPaths, resolve
from .sources import SOURCES, Candidate, Source

__all__ = ["SOURCES", "Candidate", "Hub", "HubUnreachable", "ModelPaths", "Source", "resolve"]
