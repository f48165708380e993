"""The whole conversion: checkpoint folder -> `vision.onnx` + `llm.gguf` (+ more quants) in one folder."""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import load_vision_modules, open_checkpoint
from .text_gguf import QUANTS, text_tensors, write_text_files
from .vision_export import VisionExport, export_vision
from .vocab import read_chat_template, read_vocab

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Converted:
    checkpoint: Path
    vision: VisionExport
    llm: dict[str, Path]  # quant -> GGUF; the first is llm.gguf
    seconds: float

    def describe(self) -> str:
        sizes = ", ".join(f"{s}px" for s in self.vision.checked_sizes)
        v = self.vision
        lines = [f"vision: {v.path} (D={v.embed_dim}; max |onnx - torch| {v.max_abs_diff:.2e} at {sizes})"]
        lines += [f"llm {q}: {p} ({p.stat().st_size / 2**20:.1f} MiB)" for q, p in self.llm.items()]
        return "\n".join(lines)


def convert(checkpoint: Path, out_dir: Path, quants: tuple[str, ...] = ("Q4_K_M",),
            resolution: int = 1024) -> Converted:
    """Export the vision tower + projector to ONNX and the text model to GGUF(s)."""
    bad = [q for q in quants if q not in QUANTS]
    if bad or not quants:
        raise ValueError(f"--quant must be among {', '.join(QUANTS)}, got {', '.join(quants) or 'nothing'}")
    t0 = time.perf_counter()
    ckpt = open_checkpoint(checkpoint)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tower, projector = load_vision_modules(ckpt)
    vision = export_vision(tower, projector, out_dir / "vision.onnx", resolution)
    del tower, projector
    gc.collect()
    log.info("vision exported in %.1fs", vision.seconds)
    rows = next(t.shape[0] for n, t in text_tensors(ckpt) if n == "token_embd.weight")
    vocab = read_vocab(ckpt.path, rows)
    files = write_text_files(ckpt, vocab, read_chat_template(ckpt.path), out_dir, tuple(quants), ckpt.path.name)
    return Converted(ckpt.path, vision, files.paths, time.perf_counter() - t0)
