"""Random FastVLMs in Apple's exact `llava_qwen2` layout, written from the manifest of Apple's own checkpoint.

The names, dtypes and which tensors exist come from `fastvlm.convert.manifest` (derived from Apple's model code,
not from this project); the values come from a random transformers model (`random_model.build`), looked up under
the converter's `apple_name` of each Apple key. A shrunk model keeps the manifest's entries of the blocks and
layers it has. Every model tensor must be taken by exactly one Apple key and every kept Apple key must find its
tensor, so a wrong name map fails here instead of writing a checkpoint in the map's own image.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ..convert.checkpoint import apple_name
from ..convert.manifest import Manifest, load_manifest
from ..convert.safetensors_np import f32_to_bf16, write
from .random_model import build

_BLOCK = re.compile(r"stages\.(\d+)\.blocks\.(\d+)\.")
_LAYER = re.compile(r"language_model\.layers\.(\d+)\.")


def write_apple_checkpoint(out_dir: Path, shape: str = "tiny", seed: int = 0, manifest: Manifest | None = None) -> Path:
    """A random FastVLM of `shape` (see random_model.SHAPES) saved as Apple's repos hold it: the manifest's key
    names (MobileCLIP's unused `head.proj` included) and dtypes in `model.safetensors`, Apple's config fields,
    slow-tokenizer files only. The weights are the bf16-rounded ones of `build(shape, seed)`; load the reference
    from the written folder (`verify.reference`) so both sides see the same numbers."""
    manifest = manifest or load_manifest()
    model, vocab = build(shape, seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    rows = state["model.language_model.embed_tokens.weight"].shape[0]
    tensors = apple_tensors(state, manifest, final_width=model.config.vision_config.hidden_size)
    write(out_dir / "model.safetensors", tensors, {"format": "pt"})
    (out_dir / "config.json").write_text(json.dumps(apple_config(model, rows, manifest), indent=1), encoding="utf-8")
    write_slow_tokenizer(_without_image(vocab), out_dir)
    return out_dir


def _kept(name: str, blocks: dict[int, int], layers: int) -> bool:
    """Whether a (shrunk) model has the block or layer a renamed Apple key belongs to."""
    if m := _BLOCK.search(name):
        return int(m[2]) < blocks.get(int(m[1]), 0)
    if m := _LAYER.search(name):
        return int(m[1]) < layers
    return True


def apple_tensors(state: dict[str, np.ndarray], manifest: Manifest,
                  final_width: int) -> dict[str, tuple[str, np.ndarray]]:
    """Apple key -> (dtype, array) for a model's transformers-named `state`, in the manifest's order."""
    blocks: dict[int, int] = {}
    for m in filter(None, map(_BLOCK.search, state)):
        blocks[int(m[1])] = max(blocks.get(int(m[1]), 0), int(m[2]) + 1)
    layers = len({m[1] for m in filter(None, map(_LAYER.search, state))})
    out, taken = {}, {}
    for e in manifest.entries:
        name = apple_name(e.name)
        if name is None:  # left out by the converter (MobileCLIP's image projection): zeros of the model's width
            out[e.name] = (e.dtype, np.zeros((final_width, *e.shape[1:]), np.uint16))
            continue
        if not _kept(name, blocks, layers):
            continue
        if name not in state or name in taken:
            why = f"also the name of {taken[name]}" if name in taken else "which the model does not have"
            raise AssertionError(f"Apple's {e.name} is read as {name}, {why}")
        taken[name] = e.name
        a = state[name]
        if a.ndim != len(e.shape):
            raise AssertionError(f"{e.name}: the manifest has {len(e.shape)} dimensions, the model's {name} {a.ndim}")
        out[e.name] = (e.dtype, a.astype(np.int64) if e.dtype == "I64" else f32_to_bf16(a.astype(np.float32)))
    left = sorted(set(state) - set(taken))
    if left:
        raise AssertionError(f"no Apple key of the manifest is read as {', '.join(left[:5])} ({len(left)} in all)")
    return out


def apple_config(model, vocab_rows: int, manifest: Manifest) -> dict:
    """config.json as Apple's `apple/FastVLM-*` repos write it (llava_qwen2, the Qwen2 sizes at the top level);
    the head's tying and the dtype are the manifest's."""
    text, vision = model.config.text_config, model.config.vision_config
    return {
        "architectures": ["LlavaQwen2ForCausalLM"], "model_type": "llava_qwen2",
        "auto_map": {"AutoConfig": "llava_qwen.LlavaConfig",
                     "AutoModelForCausalLM": "llava_qwen.LlavaQwen2ForCausalLM"},
        "hidden_size": text.hidden_size, "intermediate_size": text.intermediate_size,
        "num_attention_heads": text.num_attention_heads, "num_key_value_heads": text.num_key_value_heads,
        "num_hidden_layers": text.num_hidden_layers, "vocab_size": vocab_rows,
        "max_position_embeddings": text.max_position_embeddings, "rms_norm_eps": text.rms_norm_eps,
        "rope_theta": text.rope_parameters["rope_theta"], "hidden_act": "silu", "attention_dropout": 0.0,
        "tie_word_embeddings": manifest.config["tie_word_embeddings"], "torch_dtype": manifest.config["torch_dtype"],
        "use_cache": True,
        "mm_hidden_size": vision.hidden_size, "mm_projector_type": "mlp2x_gelu", "mm_vision_tower": "mobileclip_l_1024",
        "mm_vision_select_layer": -2, "mm_vision_select_feature": "patch", "mm_use_im_start_end": False,
        "mm_use_im_patch_token": False, "mm_patch_merge_type": "flat", "image_aspect_ratio": "pad",
        "image_grid_pinpoints": None, "tokenizer_model_max_length": 8192, "tokenizer_padding_side": "right",
        "use_mm_proj": True, "bos_token_id": 151643, "eos_token_id": 151645,
    }


def write_slow_tokenizer(vocab, out_dir: Path) -> None:
    """Qwen2's slow-tokenizer files (vocab.json, merges.txt, added_tokens.json, special_tokens_map.json,
    tokenizer_config.json) and no tokenizer.json, as Apple ships them; `<image>` is not in the vocabulary."""
    from fastvlm.convert.qwen2_gguf import CHAT_TEMPLATE, CONTROL, ENDOFTEXT, IM_END, IM_START, NORMAL

    regular = {t: i for i, (t, k) in enumerate(zip(vocab.tokens, vocab.types)) if k == NORMAL}
    specials = {t: i for i, (t, k) in enumerate(zip(vocab.tokens, vocab.types))
                if k == CONTROL and t in (ENDOFTEXT, IM_START, IM_END)}
    files = {
        "vocab.json": regular,
        "added_tokens.json": specials,
        "special_tokens_map.json": {"eos_token": IM_END, "pad_token": ENDOFTEXT,
                                    "additional_special_tokens": [IM_START, IM_END]},
        "tokenizer_config.json": {
            "tokenizer_class": "Qwen2Tokenizer", "model_max_length": 8192, "eos_token": IM_END, "pad_token": ENDOFTEXT,
            "bos_token": None, "errors": "replace", "split_special_tokens": False, "chat_template": CHAT_TEMPLATE,
            "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                              "single_word": False, "special": True} for t, i in specials.items()},
        },
    }
    for name, data in files.items():
        (out_dir / name).write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(vocab.merges) + "\n", encoding="utf-8")


def _without_image(vocab):
    """The vocabulary without `<image>` (Apple's placeholder is a sentinel in its code, not a token)."""
    from fastvlm.convert.qwen2_gguf import UNUSED

    from ..convert.vocab import IMAGE_TOKEN

    types = tuple(UNUSED if t == IMAGE_TOKEN else k for t, k in zip(vocab.tokens, vocab.types))
    return type(vocab)(vocab.tokens, types, vocab.merges, vocab.endoftext, vocab.im_start, vocab.im_end)
