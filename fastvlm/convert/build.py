"""The torch-free conversion: a FastVLM checkpoint folder -> `vision.onnx` + `llm.gguf`.

Needs only what requirements.txt installs (numpy, onnx, gguf, llama-cpp-python): the vision tower and
projector become an ONNX graph built from the tensors (`vision_graph`), the Qwen2 text model a GGUF
(`text_gguf`), the tokenizer is read from the checkpoint's files (`vocab`; never remote code). Both
layouts convert the same way: transformers' `fast_vlm` and Apple's `llava_qwen2` (`checkpoint`); the
architecture comes from tensor shapes and config.json (`arch`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from .arch import TextArch, VisionArch, text_arch, vision_arch
from .checkpoint import Checkpoint, open_checkpoint
from .text_gguf import resolve_quant, text_tensors, write_llm
from .vision_graph import write_vision_onnx
from .vocab import read_chat_template, read_vocab

log = logging.getLogger(__name__)

VISION_FILE, LLM_FILE = "vision.onnx", "llm.gguf"


def convert_checkpoint(checkpoint_dir: Path, out_dir: Path, quant: str = "auto", threads: int | None = None,
                       progress: Callable[[str], None] | None = None) -> tuple[Path, Path]:
    """Write `out_dir/vision.onnx` and `out_dir/llm.gguf` (as `quant`, see `text_gguf.QUANTS`) from the
    checkpoint; returns their paths. `progress` hears the stages: "reading checkpoint", "converting vision",
    "writing language model", "quantizing" (only for quantized types)."""
    vision, llms = convert_quants(checkpoint_dir, out_dir, (quant,), threads, progress)
    return vision, next(iter(llms.values()))


def convert_quants(checkpoint_dir: Path, out_dir: Path, quants: tuple[str, ...], threads: int | None = None,
                   progress: Callable[[str], None] | None = None) -> tuple[Path, dict[str, Path]]:
    """`convert_checkpoint` with one GGUF per quant: the first is `llm.gguf`, the others `llm-<quant>.gguf`.
    Returns (vision.onnx, {resolved quant: path})."""
    say = progress or (lambda stage: None)
    resolved = tuple(dict.fromkeys(resolve_quant(q) for q in quants))  # before any work: a wrong name fails at once
    if not resolved:
        raise ValueError("no --quant given")
    t0 = time.perf_counter()
    say("reading checkpoint")
    ckpt = open_checkpoint(Path(checkpoint_dir))
    varch, tarch = vision_arch(ckpt), text_arch(ckpt)
    if varch.embed_dim != tarch.hidden:
        raise ValueError(f"{ckpt.path}: the projector gives {varch.embed_dim}-wide image features, the text "
                         f"model is {tarch.hidden} wide: not one FastVLM")
    vocab = read_vocab(ckpt.path, tarch.vocab_rows)  # fails early, before minutes of writing
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    say("converting vision")
    vision = vision_and_check(ckpt, out_dir, varch, tarch)
    t1 = time.perf_counter()
    template = read_chat_template(ckpt.path)
    llms = {}
    for i, q in enumerate(resolved):
        say("writing language model")
        path = out_dir / (LLM_FILE if i == 0 else f"llm-{q}.gguf")
        llms[q] = write_llm(ckpt, tarch, vocab, template, path, q, ckpt.path.name, threads, say)
    log.info("converted %s (%s): vision %.1fs, language model %s %.1fs", ckpt.path, ckpt.layout, t1 - t0,
             "/".join(resolved), time.perf_counter() - t1)
    return vision, llms


def vision_and_check(ckpt: Checkpoint, out_dir: Path, varch: VisionArch, tarch: TextArch) -> Path:
    """`out_dir/vision.onnx`, then the check that every tensor of the checkpoint has a place: read into the graph,
    or one of the text tensors the GGUF takes as they are. Before minutes of writing the language model, a tensor
    this converter does not know is a `CheckpointError` (as is a missing one, while the graph is built)."""
    vision = write_vision_onnx(ckpt, Path(out_dir) / VISION_FILE, varch)
    text_tensors(ckpt, tarch)
    ckpt.check_all_used()
    return vision
