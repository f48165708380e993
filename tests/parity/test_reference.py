"""The reference itself (`fastvlm.verify.reference`): Apple's config.json read into transformers' FastVlmConfig
field by field, and a checkpoint whose weights do not fit the model refused by name instead of compared with
transformers' random initialisation in the gaps (the random Apple-layout checkpoint always fits, so the parity
tests alone never ask)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")

from fastvlm.convert.checkpoint import CheckpointError, Tensor, open_checkpoint  # noqa: E402
from fastvlm.verify.reference import _apple_config, load_reference_model, reference_config  # noqa: E402


class Edited:
    """A checkpoint seen with tensors dropped or added, and config.json fields changed."""

    def __init__(self, ckpt, drop=(), add=(), **raw):
        self._ckpt, self._drop, self._add = ckpt, set(drop), tuple(add)
        self.raw = {**ckpt.raw, **raw}

    def __getattr__(self, name):
        return getattr(self._ckpt, name)

    def tensors(self, prefix=""):
        kept = [t for t in self._ckpt.tensors(prefix) if t.name not in self._drop]
        return iter(kept + [t for t in self._add if t.name.startswith(prefix)])


def test_apples_config_becomes_the_reference_config(apple_checkpoint):
    ckpt = open_checkpoint(apple_checkpoint)
    raw = json.loads((apple_checkpoint / "config.json").read_text())
    config = reference_config(ckpt)
    text = config.text_config
    for field in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                  "num_hidden_layers", "vocab_size", "max_position_embeddings", "rms_norm_eps"):
        assert getattr(text, field) == raw[field], field
    assert text.rope_parameters["rope_theta"] == raw["rope_theta"] == 1e6  # not Qwen2's default 10000
    assert config.image_token_id == ckpt.unused_token_row() and not config.tie_word_embeddings
    vision = config.vision_config
    assert vision.hidden_size == raw["mm_hidden_size"] and vision.do_pooling is False
    assert vision.model_args["layers"] == [1, 1, 1, 1, 1] and vision.model_args["inference_mode"] is True


def test_fields_apple_leaves_out_take_fastvlm_05bs_values():
    config = _apple_config({"hidden_size": 64, "num_hidden_layers": 2}, 7, {"layers": [1]})
    assert config.vision_config.hidden_size == 3072 and config.tie_word_embeddings is False
    assert config.text_config.hidden_size == 64 and config.image_token_id == 7
    assert _apple_config({"tie_word_embeddings": True}, 7, {}).tie_word_embeddings is True


@pytest.fixture(scope="module")
def ckpt(apple_checkpoint):
    return open_checkpoint(apple_checkpoint)


LAYER0 = "model.language_model.layers.0.mlp.up_proj.weight"


def test_a_missing_weight_is_refused_by_name(ckpt):
    with pytest.raises(CheckpointError, match=rf"do not fit .*missing \['{LAYER0}'\], unexpected \[\]"):
        load_reference_model(Edited(ckpt, drop={LAYER0}))


def test_a_weight_the_model_lacks_is_refused_by_name(ckpt):
    stray = Tensor("model.language_model.layers.9.mlp.up_proj.weight", ckpt.index[LAYER0])
    with pytest.raises(CheckpointError, match=r"missing \[\], unexpected \['model.language_model.layers.9"):
        load_reference_model(Edited(ckpt, add=[stray]))


def test_an_untied_head_must_be_there_and_a_tied_one_is_the_embedding(ckpt):
    with pytest.raises(CheckpointError, match=r"missing \['lm_head.weight'\]"):
        load_reference_model(Edited(ckpt, drop={"lm_head.weight"}))
    model = load_reference_model(Edited(ckpt, drop={"lm_head.weight"}, tie_word_embeddings=True))
    embed = model.model.language_model.embed_tokens.weight
    assert model.lm_head.weight.data_ptr() == embed.data_ptr() and embed.abs().sum() > 0
