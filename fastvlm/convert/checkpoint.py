"""Read a FastVLM checkpoint folder: its config, and its tensors under transformers' names.

Two layouts are accepted:
- transformers (`FastVlmForConditionalGeneration`, model_type `fast_vlm`): `model.vision_tower.timm_model.*`
  (timm `fastvit_mci3`), `model.multi_modal_projector.linear_{1,2}.*`, `model.language_model.*`, `lm_head.*`
  (older transformers' `language_model.model.*` names are renamed too);
- Apple's original `llava_qwen2` (the `apple/FastVLM-*` repos): `model.vision_tower.vision_tower.model.*`
  (MobileCLIP's MCi), `model.mm_projector.{0,2}.*`, `model.layers.*`, ... renamed with the rules of
  transformers' own FastVLM conversion script. Every renamed key must land on a key of the transformers
  model and every such key must be found (strict), so a layout this does not know fails loudly.

Tensors are read lazily (memory-mapped, numpy only: `safetensors_np`), one at a time, so a 7B text model is never in
memory whole. The parity reference built from it (transformers, torch) is `fastvlm.verify.reference`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._deps import require
from .safetensors_np import TensorInfo, load_f32, read_header

VISION, PROJECTOR = "model.vision_tower.", "model.multi_modal_projector."
TEXT, HEAD = "model.language_model.", "lm_head."
_LEGACY = (("language_model.model.", TEXT), ("language_model.lm_head.", HEAD), ("vision_tower.", VISION),
           ("multi_modal_projector.", PROJECTOR))
_APPLE_STAGE = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 3, 8: 4, 9: 4, 10: 4}  # MCi network.i -> timm stage
_APPLE_RENAMES = (
    ("model.vision_tower.vision_tower.model", "model.vision_tower.timm_model"), ("patch_embed", "stem"),
    ("model.layers", "model.language_model.layers"), ("model.embed_tokens", "model.language_model.embed_tokens"),
    ("layer_scale_1", "layer_scale_1.gamma"), ("layer_scale_2", "layer_scale_2.gamma"),
    ("mm_projector.0", "multi_modal_projector.linear_1"), ("mm_projector.2", "multi_modal_projector.linear_2"),
    ("conv_exp", "final_conv"), ("se.reduce", "se.fc1"), ("se.expand", "se.fc2"), ("convffn", "mlp"),
    ("lkb_reparam", "reparam_conv"),
)
APPLE_DROPPED = ("model.vision_tower.vision_tower.model.head.proj",)  # MobileCLIP's image projection, unused


class CheckpointError(ValueError):
    """The folder is not a FastVLM checkpoint this converter can read; the message says why."""


def transformers_name(key: str) -> str:
    """A transformers-layout key, with older transformers' prefixes renamed."""
    if key.startswith(("model.", "lm_head.")):
        return key
    for old, new in _LEGACY:
        if key.startswith(old):
            return new + key[len(old):]
    return key


def apple_name(key: str) -> str | None:
    """The transformers name of one of Apple's `llava_qwen2` keys (None: a tensor that is not used)."""
    if key in APPLE_DROPPED:
        return None
    if key.endswith("layer_scale"):
        key += ".gamma"
    if key.startswith("model.norm"):
        key = key.replace("model.norm", "model.language_model.norm", 1)
    if "token_mixer" not in key:
        key = key.replace(".proj.", ".downsample.proj.")
    key = re.sub(r"network\.(\d{1,2})\.(\d{1,2})", lambda m: f"stages.{_APPLE_STAGE[int(m[1])]}.blocks.{m[2]}", key)
    key = re.sub(r"network\.(\d{1,2})", lambda m: f"stages.{_APPLE_STAGE[int(m[1])]}", key)
    key = re.sub(r"stages\.(\d)\.reparam_conv", r"stages.\1.pos_emb.reparam_conv", key)
    for old, new in _APPLE_RENAMES:
        key = key.replace(old, new)
    return key


def _apple_network() -> dict[tuple[int, str], int]:
    """(timm stage, part) -> MCi `network` index, inverted from `_APPLE_STAGE`: a stage's indices are its
    downsampling (if any), its RepCPE (if three), then its blocks (always last)."""
    out = {}
    for stage in sorted(set(_APPLE_STAGE.values())):
        idx = sorted(i for i, s in _APPLE_STAGE.items() if s == stage)
        out[(stage, "blocks")] = idx[-1]
        if len(idx) > 1:
            out[(stage, "downsample")] = idx[0]
        if len(idx) > 2:
            out[(stage, "pos_emb")] = idx[1]
    return out


def apple_key(name: str) -> str:
    """The inverse of `apple_name`: Apple's `llava_qwen2` key for a transformers name (writes test checkpoints
    in Apple's layout)."""
    if not name.startswith(VISION):
        for old, new in (("model.language_model.", "model."), ("model.multi_modal_projector.linear_1", "model.mm_projector.0"),
                         ("model.multi_modal_projector.linear_2", "model.mm_projector.2")):
            name = name.replace(old, new)
        return name
    net = _apple_network()
    key = name.replace(VISION + "timm_model.", "model.vision_tower.vision_tower.model.")
    key = re.sub(r"stages\.(\d)\.blocks\.(\d+)", lambda m: f"network.{net[(int(m[1]), 'blocks')]}.{m[2]}", key)
    key = key.replace("downsample.proj.0.reparam_conv", "downsample.proj.0.lkb_reparam")
    key = re.sub(r"stages\.(\d)\.downsample\.", lambda m: f"network.{net[(int(m[1]), 'downsample')]}.", key)
    key = re.sub(r"stages\.(\d)\.pos_emb\.", lambda m: f"network.{net[(int(m[1]), 'pos_emb')]}.", key)
    for old, new in (("model.stem.", "model.patch_embed."), ("final_conv", "conv_exp"), ("se.fc1", "se.reduce"),
                     ("se.fc2", "se.expand"), (".mlp.", ".convffn."), ("layer_scale_1.gamma", "layer_scale_1"),
                     ("layer_scale_2.gamma", "layer_scale_2"), ("layer_scale.gamma", "layer_scale")):
        key = key.replace(old, new)
    return key


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    raw: dict  # config.json as read
    layout: str  # "transformers" | "llava_qwen2"
    files: tuple[Path, ...]  # safetensors

    @functools.cached_property
    def index(self) -> dict[str, TensorInfo]:
        """transformers name -> where the tensor lies, for every tensor used (headers only, no torch)."""
        rename = apple_name if self.layout == "llava_qwen2" else transformers_name
        out: dict[str, TensorInfo] = {}
        for f in self.files:
            for key, info in read_header(f).items():
                name = rename(key)
                if name is not None:
                    out[name] = info
        return out

    def tensors(self, prefix: str = "") -> Iterator[Tensor]:
        """The tensors under `prefix` (transformers names), in file order, not yet loaded."""
        for name, info in self.index.items():
            if name.startswith(prefix):
                yield Tensor(name, info)

    def array(self, name: str) -> np.ndarray:
        """One tensor (transformers name) as float32."""
        if name not in self.index:
            raise CheckpointError(f"{self.path}: the checkpoint has no tensor {name}")
        return load_f32(self.index[name])

    def unused_token_row(self) -> int:
        """The first embedding row no token uses: the reference's image token for Apple's layout, whose
        `<image>` is a sentinel in its code, not a token (151646 in Qwen2's vocabulary)."""
        from fastvlm.convert.qwen2_gguf import UNUSED

        from .vocab import read_vocab

        types = read_vocab(self.path, self.index[TEXT + "embed_tokens.weight"].shape[0]).types
        return next(i for i, k in enumerate(types) if k == UNUSED)


@dataclass(frozen=True)
class Tensor:
    """One checkpoint tensor, loaded on demand."""

    name: str  # transformers name
    info: TensorInfo

    @property
    def shape(self) -> tuple[int, ...]:
        return self.info.shape

    def array(self) -> np.ndarray:
        """float32 numpy (bf16 widened exactly)."""
        return load_f32(self.info)

    def load(self):
        """A float32 torch tensor (reference models only)."""
        torch = require("torch")
        return torch.from_numpy(np.array(self.array()))


def open_checkpoint(path: Path) -> Checkpoint:
    path = Path(path)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{path} has no config.json: pass a FastVLM checkpoint folder")
    raw = json.loads(cfg_path.read_text(encoding="utf-8"))
    files = _safetensors(path)
    kind = raw.get("model_type")
    if kind == "fast_vlm":
        return Checkpoint(path, raw, "transformers", files)
    if kind == "llava_qwen2":
        if raw.get("mm_projector_type", "mlp2x_gelu") != "mlp2x_gelu":
            raise CheckpointError(f"{cfg_path}: projector {raw['mm_projector_type']!r} is not FastVLM's mlp2x_gelu")
        return Checkpoint(path, raw, "llava_qwen2", files)
    raise CheckpointError(f"{cfg_path}: model_type {kind!r} is neither 'fast_vlm' (transformers) nor "
                          "'llava_qwen2' (Apple's FastVLM)")


def _safetensors(path: Path) -> tuple[Path, ...]:
    index = path / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        return tuple(path / n for n in names)
    files = tuple(sorted(path.glob("*.safetensors")))
    if not files:
        raise CheckpointError(f"{path} holds no .safetensors weights (PyTorch .bin files are not read)")
    return files


