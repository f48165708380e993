"""Random-weight FastVLMs built offline with transformers, saved as ordinary checkpoints.

Shapes: `tiny` (a shrunk fastvit_mci3 and a 2-layer Qwen2; the parity test's model), `full-vision`
(the real FastViTHD tower with the tiny text model) and `0.5b` (FastViTHD + Qwen2-0.5B, for timing).

Transformers' default initialisation leaves the vision output at ~1e-21 (zero layer scales, tiny
weights), so the image would not matter and a parity check would be vacuous. `reinit` draws every
weight again so activations keep their scale through the tower, then scales the projector from the
tower's measured output so image embeddings look like token embeddings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..convert._deps import require
from .tokenizer import synth_vocab_with_image, write_tokenizer

log = logging.getLogger(__name__)

GELU_RMS = 0.65  # sqrt(E[gelu(z)^2]) for z ~ N(0, 1)


@dataclass(frozen=True)
class RandomShape:
    """Sizes of one random FastVLM."""

    vision_args: dict = field(default_factory=dict)  # timm fastvit_mci3 overrides ({} = the real FastViTHD)
    hidden: int = 64  # text hidden size D
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    vocab_size: int | None = None  # None: the synth tokenizer's tokens, padded to a multiple of 64
    tied: bool = True  # lm_head shares the token embeddings (apple/FastVLM-0.5B does not: its manifest)
    text_std: float = 0.2  # std of text weights (at 0.1 a tiny model repeats one token whatever the image)
    max_positions: int = 4096


SHAPES = {
    "tiny": RandomShape(vision_args={"layers": (1, 1, 1, 1, 1), "embed_dims": (16, 32, 64, 64, 64)}),
    "full-vision": RandomShape(tied=False),
    "0.5b": RandomShape(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab_size=151936,
                        tied=False, text_std=0.02, max_positions=32768),  # apple/FastVLM-0.5B's sizes, own lm_head
}


def build_config(shape: RandomShape, n_vocab: int, image_token_id: int):
    transformers = require("transformers")
    require("timm")
    dims = shape.vision_args.get("embed_dims", (96, 192, 384, 768, 1536))
    vision = {
        "model_type": "timm_wrapper",
        "architecture": "fastvit_mci3",
        "do_pooling": False,
        "hidden_size": 2 * dims[-1],  # fastvit's final_conv doubles the last stage's width
        "model_args": {"inference_mode": True, **{k: list(v) for k, v in shape.vision_args.items()}},
    }
    text = {
        "model_type": "qwen2", "hidden_size": shape.hidden, "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads, "num_key_value_heads": shape.kv_heads,
        "intermediate_size": shape.intermediate, "vocab_size": n_vocab, "max_position_embeddings": shape.max_positions,
        "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6},
        "tie_word_embeddings": shape.tied,
    }
    return transformers.FastVlmConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                                      tie_word_embeddings=shape.tied)


def build(shape_name: str, seed: int = 0):
    """(model in eval mode, Vocab) for one of `SHAPES`, fully determined by `seed`."""
    torch = require("torch")
    transformers = require("transformers")
    shape = SHAPES[shape_name]
    vocab, image_id = synth_vocab_with_image(shape.vocab_size)
    n_vocab = shape.vocab_size or -(-len(vocab.tokens) // 64) * 64
    config = build_config(shape, n_vocab, image_id)
    torch.manual_seed(seed)
    model = transformers.FastVlmForConditionalGeneration(config).eval()
    reinit(model, seed, shape.text_std, quiet_ids=(vocab.endoftext, vocab.im_end))
    return model, vocab


def _identity_like(conv, gen, noise: float) -> None:
    """An inference-mode RepMixer / positional-encoding conv: it has absorbed a skip connection, so it is
    the identity plus a small learned part (a purely random one makes 40 stacked convs chaotic)."""
    torch = require("torch")
    w = torch.randn(conv.weight.shape, generator=gen) * noise / conv.weight[0].numel() ** 0.5
    k = conv.weight.shape[-1] // 2
    idx = torch.arange(conv.weight.shape[0])
    w[idx, idx % conv.weight.shape[1], k, k] += 1.0
    conv.weight.copy_(w)
    conv.bias.copy_(torch.randn(conv.bias.shape, generator=gen) * 0.02)


def _reinit_tower(tower, gen) -> None:
    """Fresh random weights, then each other conv/linear rescaled so its output has unit std on a probe
    batch (layer-sequential unit variance): the image's signal then survives all stages at any depth."""
    torch = require("torch")
    nn = torch.nn
    skips = [m for n, m in tower.named_modules() if n.endswith(("token_mixer.reparam_conv", "pos_emb.reparam_conv"))]
    layers = [m for m in tower.modules() if isinstance(m, (nn.Conv2d, nn.Linear)) and all(m is not s for s in skips)]
    with torch.no_grad():
        for name, p in tower.named_parameters():
            if name.endswith("gamma"):  # layer scales: residual branches count, but do not blow up
                p.copy_(torch.rand(p.shape, generator=gen) * 0.15 + 0.05)
        for m in skips:
            _identity_like(m, gen, noise=0.2)
        for m in layers:
            m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / m.weight[0].numel() ** 0.5)
            if m.bias is not None:
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.05)
        for m in tower.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)) or type(m).__name__.startswith("LayerNorm"):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(1 + torch.randn(m.weight.shape, generator=gen) * 0.1)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                    m.running_var.copy_(1 + torch.rand(m.running_var.shape, generator=gen) * 0.2)

        def unit_std(module, _inputs, out):
            k = 1.0 / max(float(out.std()), 1e-6)
            module.weight.mul_(k)
            if module.bias is not None:
                module.bias.mul_(k)
            return out * k

        hooks = [m.register_forward_hook(unit_std) for m in layers]
        try:
            tower(torch.rand((2, 3, 256, 256), generator=gen))
        finally:
            for h in hooks:
                h.remove()


def reinit(model, seed: int, text_std: float, quiet_ids: tuple[int, ...] = ()) -> None:
    """Draw all weights again so the image matters; `quiet_ids` get zero output logits (so greedy
    answers never end early on `<|im_end|>`/end-of-text and always run the requested length)."""
    torch = require("torch")
    gen = torch.Generator().manual_seed(seed)
    inner = model.model
    _reinit_tower(inner.vision_tower, gen)
    proj = inner.multi_modal_projector
    with torch.no_grad():
        probe = torch.rand((2, 3, 256, 256), generator=gen)
        feats = inner.vision_tower(probe).last_hidden_state  # (2, C, 4, 4)
        scale = float(feats.square().mean().sqrt()) or 1.0  # RMS: the features have a large mean
        c, d = proj.linear_1.in_features, proj.linear_1.out_features
        proj.linear_1.weight.copy_(torch.randn((d, c), generator=gen) / (scale * c**0.5))
        proj.linear_1.bias.copy_(torch.randn(d, generator=gen) * 0.1)
        proj.linear_2.weight.copy_(torch.randn((d, d), generator=gen) * (text_std / GELU_RMS / d**0.5))
        proj.linear_2.bias.zero_()
        for name, p in inner.language_model.named_parameters():
            if "norm" not in name:  # RMSNorm weights stay 1
                p.copy_(torch.randn(p.shape, generator=gen) * text_std)
        if not model.config.tie_word_embeddings:
            model.lm_head.weight.copy_(torch.randn(model.lm_head.weight.shape, generator=gen) * text_std)
        for i in quiet_ids:
            model.lm_head.weight[i].zero_()
    log.debug("vision tower output std %.3g before the projector", scale)


def save(model, vocab, out_dir: Path) -> Path:
    """Save a model from `build` as a transformers checkpoint (config, safetensors, tokenizer)."""
    out_dir = Path(out_dir)
    model.save_pretrained(str(out_dir))
    write_tokenizer(vocab, out_dir)
    return out_dir


def write_checkpoint(out_dir: Path, shape_name: str = "tiny", seed: int = 0) -> Path:
    """A random FastVLM of `shape_name`, saved as a transformers checkpoint."""
    model, vocab = build(shape_name, seed)
    return save(model, vocab, out_dir)
