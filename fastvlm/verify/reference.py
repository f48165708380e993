"""transformers' `FastVlmForConditionalGeneration` built from a checkpoint folder: the reference that parity and
the converter's checks compare against (needs torch, timm and transformers)."""

from __future__ import annotations

from fastvlm.convert._deps import require
from fastvlm.convert.arch import vision_arch
from fastvlm.convert.checkpoint import Checkpoint, CheckpointError


def reference_config(ckpt: Checkpoint):
    """transformers' FastVlmConfig for `ckpt` (Apple's layout is translated; the vision tower shrunk to its stages)."""
    transformers = require("transformers")
    require("timm")
    if ckpt.layout == "transformers":
        return transformers.FastVlmConfig.from_pretrained(str(ckpt.path))
    stages = vision_arch(ckpt).stages
    shrink = {"layers": [s.blocks for s in stages], "embed_dims": [s.width for s in stages]}
    return _apple_config(ckpt.raw, ckpt.unused_token_row(), shrink)


def _apple_config(raw: dict, image_token_id: int, vision_args: dict):
    """A FastVlmConfig for Apple's llava_qwen2 config.json: its top level is the Qwen2 config."""
    transformers = require("transformers")
    text_keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                 "vocab_size", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings")
    text = {"model_type": "qwen2", **{k: raw[k] for k in text_keys if k in raw}}
    if "rope_theta" in text:
        text["rope_parameters"] = {"rope_type": "default", "rope_theta": text.pop("rope_theta")}
    vision = {"model_type": "timm_wrapper", "architecture": "fastvit_mci3", "do_pooling": False,
              "hidden_size": raw.get("mm_hidden_size", 3072), "model_args": {"inference_mode": True, **vision_args}}
    return transformers.FastVlmConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                                      tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)))


def load_reference_model(ckpt: Checkpoint):
    """The whole `FastVlmForConditionalGeneration` in float32 (the parity check's reference)."""
    torch = require("torch")
    transformers = require("transformers")
    config = reference_config(ckpt)
    model = transformers.FastVlmForConditionalGeneration(config)
    state = {t.name: t.load().float() for t in ckpt.tensors()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")
               and not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise CheckpointError(f"{ckpt.path}: weights do not fit FastVlmForConditionalGeneration "
                              f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    if config.tie_word_embeddings:
        model.tie_weights()
    with torch.no_grad():
        return model.float().eval()
