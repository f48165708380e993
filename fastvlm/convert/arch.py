"""The architecture of a FastVLM checkpoint, read from its tensor shapes and config.json (never a table).

Vision (FastViTHD = timm `fastvit_mci3` in inference mode, re-parameterised): a 3-conv stem, stages that
each may start with a downsampling patch embedding and a RepCPE positional conv, then RepMixer or attention
blocks (attention where the block has a `token_mixer.qkv`), a final MobileOne conv with squeeze-excite, and
the projector (linear -> GELU -> linear). Text: a Qwen2 decoder whose sizes come from config.json, checked
against the tensors. Names are transformers' (`checkpoint` renames Apple's keys onto them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .checkpoint import HEAD, PROJECTOR, TEXT, VISION, Checkpoint, CheckpointError

TOWER = VISION + "timm_model."
ATTENTION_HEAD_DIM = 32  # FastViT's attention uses 32-wide heads at every width (timm and Apple alike)
LAYER_NORM_EPS = 1e-5  # fastvit_mci3's LayerNorm2d in the attention blocks
BATCH_NORM_EPS = 1e-5  # torch's BatchNorm2d default (the ConvMlp's depthwise conv keeps its BN)


@dataclass(frozen=True)
class StageArch:
    """One FastViT stage."""

    index: int
    width: int  # output channels
    blocks: int
    attention: bool  # attention blocks (else RepMixer)
    downsample: bool  # starts with a stride-2 patch embedding
    pos_emb: bool  # RepCPE conv after the downsampling


@dataclass(frozen=True)
class VisionArch:
    stem_width: int
    stages: tuple[StageArch, ...]
    final_width: int  # channels out of the final MobileOne conv (= the projector's input)
    embed_dim: int  # projector output D (= the text hidden size)

    @property
    def stride(self) -> int:
        """Input pixels per output position along one side (64 for FastViTHD)."""
        return 4 * 2 ** sum(s.downsample for s in self.stages)


@dataclass(frozen=True)
class TextArch:
    """Qwen2 sizes (what the GGUF metadata needs)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab_rows: int  # rows of the embedding matrix
    max_positions: int
    rms_eps: float
    rope_theta: float
    tied: bool  # the output head is the token embedding


def _count(names: set[str], pattern: str) -> int:
    rx = re.compile(pattern)
    return len({m[1] for n in names if (m := rx.match(n))})


def vision_arch(ckpt: Checkpoint) -> VisionArch:
    shapes = {t.name[len(TOWER):]: t.shape for t in ckpt.tensors(TOWER)}
    names = set(shapes)
    if "stem.0.reparam_conv.weight" not in shapes or "final_conv.reparam_conv.weight" not in shapes:
        raise CheckpointError(f"{ckpt.path}: the vision tower is not an inference-mode FastViT (no stem.0 / "
                              "final_conv reparam_conv): re-parameterise it, or pass a FastVLM checkpoint")
    n_stages = _count(names, r"stages\.(\d+)\.")
    stages = []
    for i in range(n_stages):
        p = f"stages.{i}."
        blocks = _count(names, rf"stages\.{i}\.blocks\.(\d+)\.")
        attention = p + "blocks.0.token_mixer.qkv.weight" in shapes
        width = (shapes[p + "blocks.0.token_mixer.qkv.weight"][1] if attention
                 else shapes[p + "blocks.0.mlp.fc2.weight"][0]) if blocks else None
        downsample = p + "downsample.proj.0.reparam_conv.weight" in shapes
        if downsample:
            width = shapes[p + "downsample.proj.1.reparam_conv.weight"][0]
        if width is None:
            raise CheckpointError(f"{ckpt.path}: vision stage {i} has neither blocks nor a downsampling")
        if attention and width % ATTENTION_HEAD_DIM:
            raise CheckpointError(f"{ckpt.path}: attention stage {i} is {width} wide, not a multiple of "
                                  f"{ATTENTION_HEAD_DIM}")
        stages.append(StageArch(i, width, blocks, attention, downsample, p + "pos_emb.reparam_conv.weight" in shapes))
    final = shapes["final_conv.reparam_conv.weight"][0]
    proj = {t.name[len(PROJECTOR):]: t.shape for t in ckpt.tensors(PROJECTOR)}
    if "linear_1.weight" not in proj or "linear_2.weight" not in proj:
        raise CheckpointError(f"{ckpt.path}: no projector (multi_modal_projector.linear_1/2 or mm_projector.0/2)")
    if proj["linear_1.weight"][1] != final:
        raise CheckpointError(f"{ckpt.path}: the projector takes {proj['linear_1.weight'][1]} channels, the vision "
                              f"tower gives {final}")
    return VisionArch(shapes["stem.0.reparam_conv.weight"][0], tuple(stages), final, proj["linear_2.weight"][0])


def _text_config(ckpt: Checkpoint) -> dict:
    """The Qwen2 part of config.json: Apple's is the top level, transformers' is `text_config`."""
    if ckpt.layout == "llava_qwen2":
        return ckpt.raw
    cfg = dict(ckpt.raw.get("text_config") or {})
    cfg["tie_word_embeddings"] = bool(ckpt.raw.get("tie_word_embeddings") or cfg.get("tie_word_embeddings"))
    return cfg


def _rope_theta(cfg: dict) -> float:
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    return float(params.get("rope_theta") or cfg.get("rope_theta") or 1e6)


def text_arch(ckpt: Checkpoint) -> TextArch:
    cfg = _text_config(ckpt)
    emb = ckpt.index.get(TEXT + "embed_tokens.weight")
    if emb is None:
        raise CheckpointError(f"{ckpt.path}: no token embeddings (model.embed_tokens / "
                              "model.language_model.embed_tokens)")
    rows, hidden = emb.shape
    layers = _count(set(ckpt.index), re.escape(TEXT) + r"layers\.(\d+)\.")
    q = ckpt.index[TEXT + "layers.0.self_attn.q_proj.weight"].shape
    k = ckpt.index[TEXT + "layers.0.self_attn.k_proj.weight"].shape
    heads = int(cfg.get("num_attention_heads") or 0)
    if not heads or q[0] % heads:
        raise CheckpointError(f"{ckpt.path}: config.json's num_attention_heads ({heads}) does not divide the "
                              f"query width {q[0]}")
    head_dim = q[0] // heads
    for key, have in (("hidden_size", hidden), ("num_hidden_layers", layers)):
        if cfg.get(key) not in (None, have):
            raise CheckpointError(f"{ckpt.path}: config.json says {key}={cfg[key]}, the tensors say {have}")
    tied = bool(cfg.get("tie_word_embeddings")) or HEAD + "weight" not in ckpt.index
    return TextArch(hidden, layers, heads, k[0] // head_dim,
                    ckpt.index[TEXT + "layers.0.mlp.gate_proj.weight"].shape[0], rows,
                    int(cfg.get("max_position_embeddings") or 32768), float(cfg.get("rms_norm_eps") or 1e-6),
                    _rope_theta(cfg), tied)
