"""Read a FastVLM checkpoint folder: its config, and its tensors under transformers' names.

Two layouts are accepted:
- transformers (`FastVlmForConditionalGeneration`, model_type `fast_vlm`): `model.vision_tower.timm_model.*`
  (timm `fastvit_mci3`), `model.multi_modal_projector.linear_{1,2}.*`, `model.language_model.*`, `lm_head.*`
  (older transformers' `language_model.model.*` names are renamed too);
- Apple's original `llava_qwen2` (the `apple/FastVLM-*` repos): `model.vision_tower.vision_tower.model.*`
  (MobileCLIP's MCi), `model.mm_projector.{0,2}.*`, `model.layers.*`, ... renamed with the rules of
  transformers' own FastVLM conversion script. Every renamed key must land on a key of the transformers
  model and every such key must be found (strict), so a layout this does not know fails loudly.

Tensors are read lazily from the safetensors files, one at a time, so a 7B text model is never in memory whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._deps import require

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


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    config: object  # transformers.FastVlmConfig
    layout: str  # "transformers" | "llava_qwen2"
    files: tuple[Path, ...]  # safetensors

    @property
    def text_config(self):
        return self.config.text_config

    def keys(self) -> dict[str, tuple[Path, str, tuple[int, ...]]]:
        """transformers name -> (file, name in the file, shape), for every tensor used."""
        safetensors = require("safetensors")
        rename = apple_name if self.layout == "llava_qwen2" else transformers_name
        out: dict[str, tuple[Path, str, tuple[int, ...]]] = {}
        for f in self.files:
            with safetensors.safe_open(str(f), framework="pt") as st:
                for k in st.keys():
                    name = rename(k)
                    if name is not None:
                        out[name] = (f, k, tuple(st.get_slice(k).get_shape()))
        return out

    def tensors(self, prefix: str = "") -> Iterator[Tensor]:
        """The tensors under `prefix` (transformers names), in file order, not yet loaded."""
        for name, (f, k, shape) in self.keys().items():
            if name.startswith(prefix):
                yield Tensor(name, shape, f, k)


@dataclass(frozen=True)
class Tensor:
    """One checkpoint tensor, loaded on demand."""

    name: str  # transformers name
    shape: tuple[int, ...]
    file: Path
    key: str  # name in the file

    def load(self):
        safetensors = require("safetensors")
        with safetensors.safe_open(str(self.file), framework="pt") as st:
            return st.get_tensor(self.key)


def open_checkpoint(path: Path) -> Checkpoint:
    path = Path(path)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise CheckpointError(f"{path} has no config.json: pass a FastVLM checkpoint folder")
    raw = json.loads(cfg_path.read_text(encoding="utf-8"))
    files = _safetensors(path)
    kind = raw.get("model_type")
    if kind == "fast_vlm":
        transformers = require("transformers")
        require("timm")
        return Checkpoint(path, transformers.FastVlmConfig.from_pretrained(str(path)), "transformers", files)
    if kind == "llava_qwen2":
        return Checkpoint(path, _apple_config(raw), "llava_qwen2", files)
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


def _apple_config(raw: dict):
    """A FastVlmConfig for Apple's llava_qwen2 config.json: its top level is the Qwen2 config."""
    transformers = require("transformers")
    require("timm")
    if raw.get("mm_projector_type", "mlp2x_gelu") != "mlp2x_gelu":
        raise CheckpointError(f"projector {raw['mm_projector_type']!r} is not FastVLM's mlp2x_gelu")
    text_keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                 "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings")
    text = {"model_type": "qwen2", **{k: raw[k] for k in text_keys if k in raw}}
    if "rope_theta" in text:
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": text.pop("rope_theta")}
    vision = {"model_type": "timm_wrapper", "architecture": "fastvit_mci3", "do_pooling": False,
              "hidden_size": raw.get("mm_hidden_size", 3072), "model_args": {"inference_mode": True}}
    return transformers.FastVlmConfig(vision_config=vision, text_config=text,
                                      tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)))


def load_vision_modules(ckpt: Checkpoint):
    """(timm vision tower, projector) with the checkpoint's weights, float32, eval mode."""
    torch = require("torch")
    transformers = require("transformers")
    from transformers.models.fast_vlm.modeling_fast_vlm import FastVlmMultiModalProjector

    tower = transformers.AutoModel.from_config(ckpt.config.vision_config).timm_model
    projector = FastVlmMultiModalProjector(ckpt.config)
    for module, prefix in ((tower, VISION + "timm_model."), (projector, PROJECTOR)):
        state = {t.name[len(prefix):]: t.load().float() for t in ckpt.tensors(prefix)}
        missing, unexpected = module.load_state_dict(state, strict=False)
        missing = [k for k in missing if not k.endswith("num_batches_tracked")]
        if missing or unexpected:
            raise CheckpointError(f"{ckpt.path}: vision weights do not fit {ckpt.config.vision_config.architecture} "
                                  f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    with torch.no_grad():
        return tower.float().eval(), projector.float().eval()


def load_reference_model(ckpt: Checkpoint):
    """The whole `FastVlmForConditionalGeneration` in float32 (the parity check's reference)."""
    torch = require("torch")
    transformers = require("transformers")
    model = transformers.FastVlmForConditionalGeneration(ckpt.config)
    state = {t.name: t.load().float() for t in ckpt.tensors()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")
               and not (k == "lm_head.weight" and ckpt.config.tie_word_embeddings)]
    if missing or unexpected:
        raise CheckpointError(f"{ckpt.path}: weights do not fit FastVlmForConditionalGeneration "
                              f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    if ckpt.config.tie_word_embeddings:
        model.tie_weights()
    with torch.no_grad():
        return model.float().eval()
