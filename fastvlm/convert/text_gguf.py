"""The Qwen2 text model -> GGUF with the `gguf` package, then llama.cpp's own quantization.

Tensor names come from gguf's name map for `qwen2`; the tokenizer goes in as llama.cpp's `gpt2` model
with the `qwen2` pre-tokenizer, special tokens CONTROL, the chat template, eos `<|im_end|>`. Matrices
are written F32 or F16 (norms and biases always F32); any other type is made by `llama_model_quantize`
from the F16 file. Tensors stream from the checkpoint one at a time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastvlm.synth import quantize_gguf
from fastvlm.synth_tokenizer import Qwen2Sizes, Vocab, add_qwen2_metadata

from ._deps import require
from .checkpoint import HEAD, TEXT, Checkpoint, CheckpointError, Tensor

log = logging.getLogger(__name__)

QUANTS = ("F32", "F16", "Q8_0", "Q4_K_M")  # --quant choices; F32/F16 are written, the rest quantized
_LLAMA_FTYPES = {"F32": "LLAMA_FTYPE_ALL_F32", "F16": "LLAMA_FTYPE_MOSTLY_F16", "Q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
                 "Q4_K_M": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}


def gguf_name(name: str, n_layers: int) -> str:
    """The GGUF name of a transformers text tensor (`model.language_model.layers.0.self_attn.q_proj.weight`)."""
    gguf = require("gguf")
    hf = "model." + name[len(TEXT):] if name.startswith(TEXT) else name
    out = gguf.TensorNameMap(gguf.MODEL_ARCH.QWEN2, n_layers).get_name(hf, try_suffixes=(".weight", ".bias"))
    if out is None:
        raise CheckpointError(f"no qwen2 GGUF tensor for {name}: not a Qwen2 text model")
    return out


def _rope_theta(cfg) -> float:
    params = getattr(cfg, "rope_parameters", None) or {}
    return float(params.get("rope_theta") or getattr(cfg, "rope_theta", None) or 1e6)


def text_tensors(ckpt: Checkpoint) -> list[tuple[str, Tensor]]:
    """(GGUF name, tensor) in file order; the head is left out when it is tied to the embeddings."""
    cfg = ckpt.text_config
    tied = bool(ckpt.config.tie_word_embeddings or cfg.tie_word_embeddings)
    out = []
    for t in ckpt.tensors():
        if t.name.startswith(TEXT) or (t.name.startswith(HEAD) and not tied):
            out.append((gguf_name(t.name, cfg.num_hidden_layers), t))
    names = [n for n, _ in out]
    if "token_embd.weight" not in names or len(set(names)) != len(names):
        raise CheckpointError(f"{ckpt.path}: the text model's tensors are incomplete or duplicated")
    return out


def _as_written(t: Tensor, f16: bool) -> np.ndarray:
    a = t.load().float().numpy()
    return a.astype(np.float16) if f16 and a.ndim >= 2 else a.astype(np.float32)


def write_text_gguf(ckpt: Checkpoint, vocab: Vocab, chat_template: str, path: Path, f16: bool, name: str) -> None:
    gguf = require("gguf")
    cfg = ckpt.text_config
    items = text_tensors(ckpt)
    rows = next(t.shape[0] for n, t in items if n == "token_embd.weight")
    if len(vocab.tokens) != rows:
        raise CheckpointError(f"the tokenizer has {len(vocab.tokens)} tokens for {rows} embedding rows")
    w = gguf.GGUFWriter(str(path), "qwen2")
    sizes = Qwen2Sizes(cfg.max_position_embeddings, cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size,
                       cfg.num_attention_heads, cfg.num_key_value_heads, _rope_theta(cfg), cfg.rms_norm_eps)
    add_qwen2_metadata(w, gguf, name, sizes, f16, vocab, chat_template)
    for gname, t in items:
        dtype = np.dtype(np.float16 if f16 and len(t.shape) >= 2 else np.float32)
        w.add_tensor_info(gname, t.shape, dtype, int(np.prod(t.shape)) * dtype.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, t in items:
        w.write_tensor_data(_as_written(t, f16))
    w.close()


def quantize(src: Path, dst: Path, quant: str, threads: int | None = None) -> None:
    """`llama_model_quantize` src -> dst as `quant` (one of QUANTS)."""
    quantize_gguf(src, dst, _LLAMA_FTYPES[quant], threads)


@dataclass(frozen=True)
class TextFiles:
    paths: dict[str, Path]  # quant -> file


def write_text_files(ckpt: Checkpoint, vocab: Vocab, chat_template: str, out_dir: Path, quants: tuple[str, ...],
                     name: str) -> TextFiles:
    """One GGUF per quant: the first is `llm.gguf` (what the engine loads), the others `llm-<QUANT>.gguf`."""
    out_dir = Path(out_dir)
    paths = {q: out_dir / ("llm.gguf" if i == 0 else f"llm-{q}.gguf") for i, q in enumerate(quants)}
    base = {}
    for f16, q in ((False, "F32"), (True, "F16")):
        if q in paths:
            write_text_gguf(ckpt, vocab, chat_template, paths[q], f16, name)
            base[q] = paths[q]
    todo = [q for q in quants if q not in base]
    if todo:
        src = base.get("F16") or out_dir / "llm-F16.tmp.gguf"
        if "F16" not in base:
            write_text_gguf(ckpt, vocab, chat_template, src, True, name)
        try:
            for q in todo:
                quantize(src, paths[q], q)
                log.info("quantized %s -> %s (%s)", src.name, paths[q].name, q)
        finally:
            if "F16" not in base:
                src.unlink(missing_ok=True)
    return TextFiles(paths)
