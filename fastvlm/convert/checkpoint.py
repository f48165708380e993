"""Read a FastVLM checkpoint folder: its config, and its tensors under transformers' names.

Two layouts are accepted:
- transformers (`FastVlmForConditionalGeneration`, model_type `fast_vlm`): `model.vision_tower.timm_model.*`
  (timm `fastvit_mci3`), `model.multi_modal_projector.linear_{1,2}.*`, `model.language_model.*`, `lm_head.*`
  (older transformers' `language_model.model.*` names are renamed too);
- Apple's original `llava_qwen2` (the `apple/FastVLM-*` repos): `model.vision_tower.vision_tower.model.*`
  (MobileCLIP's MCi), `model.mm_projector.{0,2}.*`, `model.layers.*`, ... renamed with the rules of
  transformers' own FastVLM conversion script (checked against Apple's names: `manifest`).

Strict both ways, so a layout this does not know fails loudly: a tensor the converter asks for and the folder lacks
is an error (`array`), two keys that rename to one name are an error (`index`), and a tensor the conversion never
read is an error (`check_all_used`, before the language model is written) - only BatchNorm's step counter and
MobileCLIP's unused image projection (`APPLE_DROPPED`) are left out by design.

Tensors are read lazily (memory-mapped, numpy only: `safetensors_np`), one at a time, so a 7B text model is never in
memory whole. The parity reference built from it (transformers, torch) is `fastvlm.verify.reference`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
UNUSED_SUFFIXES = (".num_batches_tracked",)  # BatchNorm's training step counter: no part in inference


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


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    raw: dict  # config.json as read
    layout: str  # "transformers" | "llava_qwen2"
    files: tuple[Path, ...]  # safetensors
    used: set[str] = field(default_factory=set, compare=False, repr=False)  # names the conversion has taken

    @functools.cached_property
    def index(self) -> dict[str, TensorInfo]:
        """transformers name -> where the tensor lies, for every tensor used (headers only, no torch)."""
        rename = apple_name if self.layout == "llava_qwen2" else transformers_name
        out: dict[str, TensorInfo] = {}
        for f in self.files:
            for key, info in read_header(f).items():
                name = rename(key)
                if name is None:
                    continue
                if name in out:
                    raise CheckpointError(f"{self.path}: {out[name].key} and {key} are both read as {name}: a "
                                          "layout this converter does not know")
                out[name] = info
        return out

    def use(self, names) -> None:
        """Mark tensors as taken by the conversion (read, or written as they are)."""
        self.used.update(names)

    def unused(self) -> list[str]:
        """Tensors the conversion has not taken (besides the ones left out by design), in file order."""
        return [n for n in self.index if n not in self.used and not n.endswith(UNUSED_SUFFIXES)]

    def check_all_used(self) -> None:
        """A `CheckpointError` naming the tensors nothing converted: the output would silently lack them."""
        left = self.unused()
        if left:
            raise CheckpointError(f"{self.path}: {len(left)} tensor(s) this converter does not know, e.g. "
                                  f"{', '.join(left[:5])}: not a FastVLM layout it can convert faithfully")

    def tensors(self, prefix: str = "") -> Iterator[Tensor]:
        """The tensors under `prefix` (transformers names), in file order, not yet loaded."""
        for name, info in self.index.items():
            if name.startswith(prefix):
                yield Tensor(name, info)

    def array(self, name: str) -> np.ndarray:
        """One tensor (transformers name) as float32."""
        if name not in self.index:
            raise CheckpointError(f"{self.path}: the checkpoint has no tensor {name}")
        self.used.add(name)
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


