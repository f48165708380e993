"""text_gguf.text_tensors on a checkpoint written here: which tensors go into the GGUF and under which names,
and a text model that lacks its embedding or names a tensor twice is refused."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm.convert import safetensors_np as st
from fastvlm.convert.arch import TextArch
from fastvlm.convert.checkpoint import Checkpoint, CheckpointError
from fastvlm.convert.text_gguf import text_tensors

pytest.importorskip("gguf")

EMBED, NORM, HEAD = "model.language_model.embed_tokens.weight", "model.language_model.norm.weight", "lm_head.weight"


def checkpoint(tmp_path, names) -> Checkpoint:
    st.write(tmp_path / "model.safetensors", {n: ("F32", np.zeros((4, 2), np.float32)) for n in names})
    return Checkpoint(tmp_path, {}, "transformers", (tmp_path / "model.safetensors",))


def arch(tied: bool) -> TextArch:
    return TextArch(2, 1, 1, 1, 4, 4, 32, 1e-6, 1e6, tied)


@pytest.mark.parametrize("tied, want", [(True, ["token_embd.weight", "output_norm.weight"]),
                                        (False, ["token_embd.weight", "output_norm.weight", "output.weight"])])
def test_the_head_is_written_only_when_it_is_not_the_embedding(tmp_path, tied, want):
    ckpt = checkpoint(tmp_path, [EMBED, NORM, HEAD, "model.vision_tower.x.weight"])
    assert [name for name, _ in text_tensors(ckpt, arch(tied))] == want
    assert ckpt.used == {EMBED, NORM} | ({HEAD} if not tied else set())  # the vision tower's is not taken here


def test_a_text_model_without_its_embedding_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="incomplete or duplicated"):
        text_tensors(checkpoint(tmp_path, [NORM, HEAD]), arch(False))


def test_two_tensors_written_under_one_name_are_refused(tmp_path):
    # gguf's name map takes several spellings of one tensor: a checkpoint holding two of them is not one model
    layer = "model.language_model.layers.0."
    names = [n for n, _ in text_tensors(checkpoint(tmp_path, [EMBED, layer + "input_layernorm.weight"]), arch(True))]
    assert names == ["token_embd.weight", "blk.0.attn_norm.weight"]
    twins = checkpoint(tmp_path, [EMBED, layer + "input_layernorm.weight", layer + "attention_norm.weight"])
    with pytest.raises(CheckpointError, match="incomplete or duplicated"):
        text_tensors(twins, arch(True))
