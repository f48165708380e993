"""Checkpoints in Apple's layout written from the manifest alone, without torch: every tensor zero and the data
region sparse (no disk blocks, nothing read until used), so even the whole apple/FastVLM-0.5B costs a header."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

from fastvlm.convert.manifest import Entry, Manifest

_BLOCK = re.compile(r"\.network\.\d+\.(\d+)\.")
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


def shrunk(entries: tuple[Entry, ...], blocks: int = 1, layers: int = 1) -> tuple[Entry, ...]:
    """The entries of the first `blocks` blocks of every vision stage and the first `layers` text layers."""
    def kept(name: str) -> bool:
        b, t = _BLOCK.search(name), _LAYER.search(name)
        return (b is None or int(b[1]) < blocks) and (t is None or int(t[1]) < layers)
    return tuple(e for e in entries if kept(e.name))


def write_zero_checkpoint(folder: Path, entries: tuple[Entry, ...], manifest: Manifest, **config) -> Path:
    """`folder` with config.json (llava_qwen2, the manifest's sizes, `config` on top) and a sparse, all-zero
    model.safetensors holding `entries`."""
    folder.mkdir(parents=True, exist_ok=True)
    header, offset = {}, 0
    for e in entries:
        header[e.name] = {"dtype": e.dtype, "shape": list(e.shape), "data_offsets": [offset, offset + e.nbytes]}
        offset += e.nbytes
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        f.truncate(8 + len(head) + offset)
    cfg = {"model_type": "llava_qwen2", **manifest.config, **config}
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder
