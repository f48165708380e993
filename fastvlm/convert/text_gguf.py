"""The Qwen2 text model -> GGUF with numpy and the `gguf` package, then llama.cpp's own quantization.

Tensor names come from gguf's name map for `qwen2`; the tokenizer goes in as llama.cpp's `gpt2` model with
the `qwen2` pre-tokenizer, special tokens CONTROL, the chat template, eos `<|im_end|>`. Matrices are written
F32, F16 or BF16 (norms and biases always F32; a bf16 checkpoint written as BF16 is bit-exact); every other
type is made by `llama_model_quantize` from a BF16 file (bf16 checkpoints) or an F32 one (others), so
quantizing never rounds twice. Tensors stream from the memory-mapped safetensors one at a time.

Quant names: auto | bf16 | q8_0 | q4_0 | iq4_nl | q4_k_m | f16 | f32 (case-insensitive). `auto` = the fastest type at
acceptable fidelity for this CPU's class (`fastvlm.amx.policy`): Q8_0 where llama.cpp's AMX int8 kernels work,
else BF16 where the CPU computes bf16 natively (AVX-512 BF16 / AMX: exact and fast), else Q8_0.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np

from fastvlm.amx.policy import auto_quant
from fastvlm.convert.quantize import quantize_gguf
from fastvlm.convert.qwen2_gguf import Qwen2Sizes, Vocab, add_qwen2_metadata

from ._deps import require
from .arch import TextArch
from .checkpoint import HEAD, TEXT, Checkpoint, CheckpointError, Tensor
from .safetensors_np import f32_to_bf16, load

log = logging.getLogger(__name__)

QUANTS = ("auto", "bf16", "q8_0", "q4_0", "iq4_nl", "q4_k_m", "f16", "f32")
WRITTEN = ("f32", "f16", "bf16")  # written directly; the rest quantized by llama.cpp
_LLAMA_FTYPES = {"q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0", "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
                 "iq4_nl": "LLAMA_FTYPE_MOSTLY_IQ4_NL", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
                 "f16": "LLAMA_FTYPE_MOSTLY_F16", "bf16": "LLAMA_FTYPE_MOSTLY_BF16", "f32": "LLAMA_FTYPE_ALL_F32"}


def resolve_quant(quant: str, bf16_native: bool | None = None) -> str:
    """A concrete quant name (lower case) for `quant`. `auto`: by the CPU class (`fastvlm.amx.policy.auto_quant`,
    which runs the AMX probe once on an AMX CPU); `bf16_native` given: BF16 or Q8_0 by that alone."""
    q = quant.lower()
    if q not in QUANTS:
        raise ValueError(f"--quant must be one of {', '.join(QUANTS)}, got {quant!r}")
    if q == "auto":
        if bf16_native is None:
            return auto_quant()
        return "bf16" if bf16_native else "q8_0"
    return q


@functools.cache
def _name_map(n_layers: int):
    """gguf's Qwen2 tensor-name map (a few ms to build: once per layer count, not once per tensor)."""
    gguf = require("gguf")
    return gguf.TensorNameMap(gguf.MODEL_ARCH.QWEN2, n_layers)


def gguf_name(name: str, n_layers: int) -> str:
    """The GGUF name of a transformers text tensor (`model.language_model.layers.0.self_attn.q_proj.weight`)."""
    hf = "model." + name[len(TEXT):] if name.startswith(TEXT) else name
    out = _name_map(n_layers).get_name(hf, try_suffixes=(".weight", ".bias"))
    if out is None:
        raise CheckpointError(f"no qwen2 GGUF tensor for {name}: not a Qwen2 text model")
    return out


def text_tensors(ckpt: Checkpoint, arch: TextArch) -> list[tuple[str, Tensor]]:
    """(GGUF name, tensor) in file order; the head is left out when it is tied to the embeddings."""
    out = [(gguf_name(t.name, arch.layers), t) for t in ckpt.tensors()
           if t.name.startswith(TEXT) or (t.name.startswith(HEAD) and not arch.tied)]
    names = [n for n, _ in out]
    if "token_embd.weight" not in names or len(set(names)) != len(names):
        raise CheckpointError(f"{ckpt.path}: the text model's tensors are incomplete or duplicated")
    ckpt.use(t.name for _, t in out)
    return out


def _as_written(t: Tensor, dtype: str) -> np.ndarray:
    """The tensor as the GGUF stores it: matrices in `dtype`, vectors F32; BF16 as raw uint16 bits."""
    if len(t.shape) < 2 or dtype == "f32":
        return t.array()
    if dtype == "f16":
        return t.array().astype(np.float16)
    return np.asarray(load(t.info)) if t.info.dtype == "BF16" else f32_to_bf16(t.array())  # bf16 stays bit-exact


def write_text_gguf(ckpt: Checkpoint, arch: TextArch, vocab: Vocab, chat_template: str, path: Path, dtype: str,
                    name: str) -> Path:
    """A `qwen2` GGUF with matrices in `dtype` (f32 | f16 | bf16)."""
    gguf = require("gguf")
    if dtype not in WRITTEN:
        raise ValueError(f"write_text_gguf writes {', '.join(WRITTEN)}, not {dtype!r}")
    items = text_tensors(ckpt, arch)
    if len(vocab.tokens) != arch.vocab_rows:
        raise CheckpointError(f"the tokenizer has {len(vocab.tokens)} tokens for {arch.vocab_rows} embedding rows")
    w = gguf.GGUFWriter(str(path), "qwen2")
    sizes = Qwen2Sizes(arch.max_positions, arch.hidden, arch.layers, arch.intermediate, arch.heads, arch.kv_heads,
                       arch.rope_theta, arch.rms_eps)
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "bf16": gguf.LlamaFileType.MOSTLY_BF16}[dtype]
    add_qwen2_metadata(w, gguf, name, sizes, dtype == "f16", vocab, chat_template, file_type=file_type)
    raw = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
           "bf16": gguf.GGMLQuantizationType.BF16}
    for gname, t in items:
        kind = dtype if len(t.shape) >= 2 else "f32"
        np_dtype = np.dtype({"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[kind])
        w.add_tensor_info(gname, t.shape, np_dtype, int(np.prod(t.shape)) * np_dtype.itemsize, raw_dtype=raw[kind])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _, t in items:
        w.write_tensor_data(_as_written(t, dtype))
    w.close()
    return Path(path)


def quantize(src: Path, dst: Path, quant: str, threads: int | None = None) -> None:
    """`llama_model_quantize` src -> dst as `quant` (a name of QUANTS other than auto)."""
    quantize_gguf(src, dst, _LLAMA_FTYPES[quant], threads)


def source_is_bf16(ckpt: Checkpoint, arch: TextArch) -> bool:
    return all(t.info.dtype == "BF16" for _, t in text_tensors(ckpt, arch) if len(t.shape) >= 2)


def write_llm(ckpt: Checkpoint, arch: TextArch, vocab: Vocab, chat_template: str, path: Path, quant: str,
              name: str, threads: int | None = None, progress=None) -> Path:
    """`path` as `quant` (resolved, not auto): written directly, or written lossless and then quantized."""
    path = Path(path)
    if quant in WRITTEN:
        return write_text_gguf(ckpt, arch, vocab, chat_template, path, quant, name)
    base = "bf16" if source_is_bf16(ckpt, arch) else "f32"  # lossless for the source: one rounding only
    tmp = path.with_name(path.name + f".{base}.tmp")
    try:
        write_text_gguf(ckpt, arch, vocab, chat_template, tmp, base, name)
        if progress:
            progress("quantizing")
        quantize(tmp, path, quant, threads)
        log.info("quantized %s -> %s (%s)", tmp.name, path.name, quant)
    finally:
        tmp.unlink(missing_ok=True)
    return path
