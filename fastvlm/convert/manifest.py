"""The tensors of Apple's published checkpoints, as data derived outside this project.

`manifests/<name>.json` lists every tensor of one `apple/FastVLM-*` repo's model.safetensors (name, shape, dtype) in
Apple's `llava_qwen2` layout. Each file's header says where it comes from (repository, commit, files) and how it
was derived (Apple's own model classes built with random weights, cross-checked with transformers' conversion key
map); never from this project's code. Tests convert it and write random Apple-layout checkpoints from it, so the
key mapping (`checkpoint.apple_name`) is checked against Apple's names, not against its own inverse.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path

MANIFESTS = Path(__file__).with_name("manifests")
APPLE_05B = "apple-FastVLM-0.5B"
HEADER_KEYS = ("model", "source", "derived", "config")  # what every manifest must say about itself
_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8}


@dataclass(frozen=True)
class Entry:
    name: str  # Apple's key
    shape: tuple[int, ...]
    dtype: str  # safetensors dtype name

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _BYTES[self.dtype]


@dataclass(frozen=True)
class Manifest:
    header: dict  # model, source {repository, commit, files}, derived, config, cross_checks
    entries: tuple[Entry, ...]

    @property
    def config(self) -> dict:
        """The config.json fields the tensors were derived with (sizes, tie_word_embeddings, torch_dtype)."""
        return self.header["config"]


@functools.cache
def load_manifest(name: str = APPLE_05B) -> Manifest:
    """One manifest from `manifests/`; a file without its provenance header is refused."""
    path = MANIFESTS / f"{name}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in HEADER_KEYS if k not in data]
    if missing or not {"repository", "commit"} <= set(data["source"]):
        raise ValueError(f"{path}: the header must say {', '.join(HEADER_KEYS)} and source.repository/commit")
    entries = tuple(Entry(n, tuple(s), d) for n, s, d in data.pop("tensors"))
    if len({e.name for e in entries}) != len(entries):
        raise ValueError(f"{path}: a tensor name is listed twice")
    return Manifest(data, entries)
