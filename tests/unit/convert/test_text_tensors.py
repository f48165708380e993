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


def checkpoint(tmp_path, names, dtype: str = "F32", norm_dtype: str = "F32") -> Checkpoint:
    """Each named tensor (4, 2) in `dtype`, except 1-D `.norm.` weights in `norm_dtype`; values 1.0 + 2^-10."""
    value = np.full((4, 2), 1 + 2**-10, np.float32)  # between two bf16 values: a bf16 rounding shows

    def stored(name):
        if ".norm." in name:
            return norm_dtype, value[0] if norm_dtype == "F32" else st.f32_to_bf16(value[0])
        return dtype, value if dtype == "F32" else st.f32_to_bf16(value)

    st.write(tmp_path / "model.safetensors", {n: stored(n) for n in names})
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


@pytest.mark.parametrize("dtype, norm_dtype, bf16", [("F32", "F32", False), ("BF16", "BF16", True),
                                                     ("BF16", "F32", True), ("F32", "BF16", False)])
def test_a_source_is_bf16_when_its_matrices_are(tmp_path, dtype, norm_dtype, bf16):
    """What a quantization starts from: the checkpoint's matrices without loss (BF16 ones as BF16, F32 ones as
    F32, never rounded to bf16 first); the vectors do not decide."""
    from fastvlm.convert.text_gguf import source_is_bf16

    ckpt = checkpoint(tmp_path, [EMBED, NORM], dtype, norm_dtype)
    assert source_is_bf16(ckpt, arch(True)) is bf16


@pytest.mark.parametrize("dtype", ["F32", "BF16"])
def test_bf16_matrices_are_the_checkpoints_rounded_once(tmp_path, dtype):
    from fastvlm.convert.text_gguf import _as_written

    ckpt = checkpoint(tmp_path, [EMBED, NORM], dtype)
    embed, norm = (t for _, t in text_tensors(ckpt, arch(True)))
    written = _as_written(embed, "bf16")
    assert written.dtype == np.uint16 and written.shape == (4, 2)
    assert np.array_equal(written, st.f32_to_bf16(np.full((4, 2), 1 + 2**-10, np.float32)))
    assert _as_written(norm, "bf16").dtype == np.float32  # vectors stay F32
