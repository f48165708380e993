"""open_checkpoint on folders written here: a sharded checkpoint read through its index, and the embedding row the
reference takes for Apple's `<image>` (the first row no token uses, 151646 in Qwen2's vocabulary)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fastvlm.convert import safetensors_np as st
from fastvlm.convert.checkpoint import TEXT, CheckpointError, open_checkpoint
from tests.unit.convert.test_convert_torchfree import slow_tokenizer_files

CONFIG = json.dumps({"model_type": "fast_vlm"})


def test_a_sharded_checkpoint_is_read_through_its_index(tmp_path):
    (tmp_path / "config.json").write_text(CONFIG)
    st.write(tmp_path / "model-00001-of-00002.safetensors", {TEXT + "embed_tokens.weight": ("F32", np.ones((3, 2)))})
    st.write(tmp_path / "model-00002-of-00002.safetensors", {TEXT + "norm.weight": ("F32", np.ones(2))})
    st.write(tmp_path / "stray.safetensors", {"other.weight": ("F32", np.ones(1))})  # not in the index: not read
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        TEXT + "embed_tokens.weight": "model-00001-of-00002.safetensors",
        TEXT + "norm.weight": "model-00002-of-00002.safetensors"}}))
    ckpt = open_checkpoint(tmp_path)
    assert [f.name for f in ckpt.files] == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert list(ckpt.index) == [TEXT + "embed_tokens.weight", TEXT + "norm.weight"]
    assert ckpt.array(TEXT + "norm.weight").tolist() == [1.0, 1.0]


def test_a_folder_without_safetensors_says_so(tmp_path):
    (tmp_path / "config.json").write_text(CONFIG)
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0")
    with pytest.raises(CheckpointError, match="no .safetensors weights"):
        open_checkpoint(tmp_path)


def test_the_image_row_is_the_first_row_no_token_uses(tmp_path):
    (tmp_path / "config.json").write_text(CONFIG)
    slow_tokenizer_files(tmp_path)
    st.write(tmp_path / "model.safetensors", {TEXT + "embed_tokens.weight": ("F32", np.zeros((9, 2)))})
    assert open_checkpoint(tmp_path).unused_token_row() == 6  # rows 6-8 are padding: the first is the image's


def _transformers_text(tmp_path, config: dict, head: bool = True):
    from fastvlm.convert.arch import text_arch

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "fast_vlm", **config}))
    layer = TEXT + "layers.0."
    tensors = {TEXT + "embed_tokens.weight": (10, 4), layer + "self_attn.q_proj.weight": (4, 4),
               layer + "self_attn.k_proj.weight": (2, 4), layer + "mlp.gate_proj.weight": (8, 4)}
    if head:
        tensors["lm_head.weight"] = (10, 4)
    st.write(tmp_path / "model.safetensors", {n: ("F32", np.zeros(s, np.float32)) for n, s in tensors.items()})
    return text_arch(open_checkpoint(tmp_path))


@pytest.mark.parametrize("top, inner, tied", [(None, None, False), (True, None, True), (None, True, True),
                                               (False, False, False)])
def test_transformers_layout_reads_text_config_and_a_tie_stated_at_either_level(tmp_path, top, inner, tied):
    text = {"num_attention_heads": 2, "hidden_size": 4, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096, **(
        {} if inner is None else {"tie_word_embeddings": inner})}
    arch = _transformers_text(tmp_path, {"text_config": text, **({} if top is None else {"tie_word_embeddings": top})})
    assert (arch.heads, arch.kv_heads, arch.hidden, arch.intermediate, arch.vocab_rows, arch.rms_eps,
            arch.max_positions) == (2, 1, 4, 8, 10, 1e-5, 4096)
    assert arch.tied is tied


def test_a_config_that_disagrees_with_the_tensors_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="config.json says hidden_size=8, the tensors say 4"):
        _transformers_text(tmp_path, {"text_config": {"num_attention_heads": 2, "hidden_size": 8}})


@pytest.mark.parametrize("rope, theta", [({}, 1e6), ({"rope_theta": 5e5}, 5e5),
                                         ({"rope_parameters": {"rope_theta": 2e5}, "rope_theta": 5e5}, 2e5)])
def test_rope_theta_from_the_newer_or_older_key_else_qwen2s(tmp_path, rope, theta):
    arch = _transformers_text(tmp_path, {"text_config": {"num_attention_heads": 2, **rope}})
    assert arch.rope_theta == theta
