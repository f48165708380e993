"""`apple_tensors`, which lays a random model's weights out under Apple's keys: every manifest key of a kept block
or layer takes exactly one model tensor, and a wrong name map fails there instead of writing a checkpoint in the
map's own image. Checked on stand-in weights (one value per tensor, the right number of dimensions), no torch."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fastvlm.convert.checkpoint import apple_name
from fastvlm.convert.manifest import Manifest, load_manifest
from fastvlm.convert.safetensors_np import f32_to_bf16
from fastvlm.synth.apple_layout import apple_tensors

MANIFEST = load_manifest()
HEAD = "model.vision_tower.vision_tower.model.head.proj"  # MobileCLIP's projection: no transformers name


def _state(blocks: int | None = None, layers: int | None = None) -> dict[str, np.ndarray]:
    """A model's transformers-named tensors for every manifest key, or for the first `blocks` blocks of each
    stage and `layers` text layers; each tensor's value is its index + 1."""
    state = {}
    for i, e in enumerate(MANIFEST.entries):
        name = apple_name(e.name)
        if name is None:
            continue
        block = re.search(r"stages\.\d+\.blocks\.(\d+)\.", name)
        layer = re.search(r"language_model\.layers\.(\d+)\.", name)
        if (blocks is not None and block and int(block[1]) >= blocks) or \
                (layers is not None and layer and int(layer[1]) >= layers):
            continue
        state[name] = np.full((1,) * len(e.shape), i + 1, np.float32)
    return state


def test_every_key_takes_its_own_tensor_in_the_manifests_dtype():
    state = _state()
    out = apple_tensors(state, MANIFEST, final_width=48)
    assert list(out) == [e.name for e in MANIFEST.entries]
    for i, e in enumerate(MANIFEST.entries):
        dtype, a = out[e.name]
        assert dtype == e.dtype
        if e.name == HEAD:
            assert a.shape == (48, *e.shape[1:]) and a.dtype == np.uint16 and not a.any()
        elif e.dtype == "I64":
            assert a.dtype == np.int64 and a.item() == i + 1
        else:
            assert a.dtype == np.uint16 and a.item() == f32_to_bf16(np.float32([i + 1]))[0]


def test_a_shrunk_model_keeps_the_keys_of_its_blocks_and_layers():
    out = apple_tensors(_state(blocks=1, layers=1), MANIFEST, final_width=48)
    blocks = {int(m[1]) for k in out if (m := re.search(r"\.network\.\d+\.(\d+)\.", k))}
    layers = {int(m[1]) for k in out if (m := re.search(r"^model\.layers\.(\d+)\.", k))}
    assert blocks == {0} and layers == {0}
    assert HEAD in out and "model.embed_tokens.weight" in out and "lm_head.weight" in out
    assert len(out) < len(MANIFEST.entries)


def test_a_key_the_model_lacks_fails():
    state = _state()
    del state["model.language_model.norm.weight"]
    with pytest.raises(AssertionError, match="model.norm.weight is read as model.language_model.norm.weight, which "
                                             "the model does not have"):
        apple_tensors(state, MANIFEST, final_width=48)


def test_two_keys_read_as_one_name_fail():
    twice = Manifest(MANIFEST.header, MANIFEST.entries + (MANIFEST.entries[0],))
    with pytest.raises(AssertionError, match=r"model.embed_tokens.weight is read as .*, also the name of "
                                             r"model.embed_tokens.weight"):
        apple_tensors(_state(), twice, final_width=48)


def test_a_model_tensor_no_key_takes_fails():
    state = _state() | {"model.language_model.extra.weight": np.zeros((1, 1), np.float32)}
    with pytest.raises(AssertionError, match=r"no Apple key of the manifest is read as "
                                             r"model.language_model.extra.weight \(1 in all\)"):
        apple_tensors(state, MANIFEST, final_width=48)


def test_a_tensor_with_other_dimensions_fails():
    state = _state()
    state["model.language_model.norm.weight"] = np.zeros((1, 1), np.float32)
    with pytest.raises(AssertionError, match="model.norm.weight: the manifest has 1 dimensions, the model's "
                                             "model.language_model.norm.weight 2"):
        apple_tensors(state, MANIFEST, final_width=48)
