"""The converter against Apple's own layout: the manifest of apple/FastVLM-0.5B's tensors (derived from Apple's
model code, never from this project), converted from header-only zero checkpoints (no torch, no download)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from fastvlm.convert.arch import text_arch, vision_arch
from fastvlm.convert.build import vision_and_check
from fastvlm.convert.checkpoint import APPLE_DROPPED, CheckpointError, apple_name, open_checkpoint
from fastvlm.convert import manifest
from fastvlm.convert.manifest import Entry, load_manifest
from tests.apple_layout import shrunk, write_zero_checkpoint

MANIFEST = load_manifest()
# FastViTHD as Apple's mci.py `fastvithd()` defines it: layers, embed_dims, token mixers, RepCPE positions
FASTVITHD = {"blocks": (2, 12, 24, 4, 2), "widths": (96, 192, 384, 768, 1536),
             "attention": (False, False, False, True, True), "pos_emb": (False, False, False, True, True)}


def test_the_manifest_says_where_it_comes_from():
    source = MANIFEST.header["source"]
    assert source["repository"] == "https://github.com/apple/ml-fastvlm"
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
    assert "llava/model/multimodal_encoder/mobileclip/mci.py" in source["files"]
    assert "Never derived from this project's code" in MANIFEST.header["derived"]
    assert {e.dtype for e in MANIFEST.entries} == {"BF16", "I64"} and len(MANIFEST.entries) > 900


@pytest.mark.parametrize("dtype, size", [("BF16", 2), ("F16", 2), ("F32", 4), ("I64", 8)])
def test_an_entrys_bytes_are_its_elements_times_its_dtypes_size(dtype, size):
    """What the random Apple-layout checkpoints are laid out by (tests/apple_layout.py); Apple's are BF16 and I64."""
    assert Entry("w", (3, 5), dtype).nbytes == 15 * size


HEADER = {"model": "m", "source": {"repository": "r", "commit": "c"}, "derived": "d", "config": {}}


@pytest.mark.parametrize("change, ok", [
    ({}, True),  # a source of exactly repository and commit is enough
    ({"derived": None}, False),  # a header key missing, though the source is whole
    ({"source": {"repository": "r"}}, False),  # the source without its commit
    ({"tensors": [["w", [2], "BF16"], ["w", [3], "BF16"]]}, False),  # one name twice
])  # fmt: skip
def test_a_manifest_is_refused_without_its_provenance_or_with_a_name_twice(tmp_path, monkeypatch, change, ok):
    data = {**HEADER, "tensors": [["w", [2], "BF16"]], **change}
    data = {k: v for k, v in data.items() if v is not None}
    (tmp_path / "case.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(manifest, "MANIFESTS", tmp_path)
    load = manifest.load_manifest.__wrapped__  # not its cache: every case is called "case"
    if ok:
        assert [e.name for e in load("case").entries] == ["w"]
    else:
        with pytest.raises(ValueError, match="header must say|listed twice"):
            load("case")


def test_every_apple_key_becomes_one_distinct_name():
    names = [apple_name(e.name) for e in MANIFEST.entries]
    assert [e.name for e, n in zip(MANIFEST.entries, names) if n is None] == list(APPLE_DROPPED)
    kept = [n for n in names if n is not None]
    assert len(set(kept)) == len(kept)
    assert all(n.startswith(("model.vision_tower.timm_model.", "model.multi_modal_projector.", "model.language_model.",
                             "lm_head.")) for n in kept)


def test_the_architecture_is_read_from_apples_tensors(tmp_path):
    ckpt = open_checkpoint(write_zero_checkpoint(tmp_path, MANIFEST.entries, MANIFEST))
    v, t = vision_arch(ckpt), text_arch(ckpt)
    assert tuple(s.blocks for s in v.stages) == FASTVITHD["blocks"]
    assert tuple(s.width for s in v.stages) == FASTVITHD["widths"]
    assert tuple(s.attention for s in v.stages) == FASTVITHD["attention"]
    assert tuple(s.pos_emb for s in v.stages) == FASTVITHD["pos_emb"]
    assert (v.final_width, v.embed_dim, v.stride) == (MANIFEST.config["mm_hidden_size"], t.hidden, 64)
    cfg = MANIFEST.config
    assert (t.hidden, t.layers, t.heads, t.kv_heads, t.intermediate, t.vocab_rows, t.tied) == (
        cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
        cfg["intermediate_size"], cfg["vocab_size"], cfg["tie_word_embeddings"])


@pytest.mark.slow
def test_the_converter_takes_every_tensor_of_apple_fastvlm_05b(tmp_path):
    """The whole layout: the vision graph built from every vision tensor, the text tensors planned into the GGUF,
    nothing left over (about 3 s and 1.5 GB: real shapes, zero weights)."""
    ckpt = open_checkpoint(write_zero_checkpoint(tmp_path / "ckpt", MANIFEST.entries, MANIFEST))
    vision_and_check(ckpt, tmp_path / "out", vision_arch(ckpt), text_arch(ckpt))
    taken = {n for n in ckpt.index if not n.endswith(".num_batches_tracked")}
    assert ckpt.used == taken and len(taken) == len(MANIFEST.entries) - 1 - 44  # less head.proj and 44 BN counters


def _convert_shrunk(tmp_path, entries):
    ckpt = open_checkpoint(write_zero_checkpoint(tmp_path / "ckpt", entries, MANIFEST, num_hidden_layers=1))
    return vision_and_check(ckpt, tmp_path / "out", vision_arch(ckpt), text_arch(ckpt))


def test_a_shrunk_apple_layout_converts(tmp_path):
    assert _convert_shrunk(tmp_path, shrunk(MANIFEST.entries)).is_file()


def test_a_tensor_the_converter_does_not_know_fails_loudly(tmp_path):
    entries = shrunk(MANIFEST.entries)
    extra = replace(entries[-5], name="model.vision_tower.vision_tower.model.network.0.0.convffn.fc3.weight")
    with pytest.raises(CheckpointError, match=r"does not know.*stages\.0\.blocks\.0\.mlp\.fc3\.weight"):
        _convert_shrunk(tmp_path, entries + (extra,))


@pytest.mark.parametrize("gone", ["model.vision_tower.vision_tower.model.conv_exp.reparam_conv.bias",
                                  "model.vision_tower.vision_tower.model.network.7.0.token_mixer.proj.bias",
                                  "model.mm_projector.2.bias"])
def test_a_missing_tensor_fails_loudly(tmp_path, gone):
    entries = tuple(e for e in shrunk(MANIFEST.entries) if e.name != gone)
    with pytest.raises(CheckpointError, match=re.escape(apple_name(gone))):
        _convert_shrunk(tmp_path, entries)


def test_two_keys_read_as_one_name_fail(tmp_path):
    entries = shrunk(MANIFEST.entries)
    scale = next(e for e in entries if e.name.endswith("network.0.0.layer_scale"))
    with pytest.raises(CheckpointError, match="are both read as"):
        _convert_shrunk(tmp_path, entries + (replace(scale, name=scale.name + ".gamma"),))


@pytest.mark.parametrize("gone, message", [
    ("model.mm_projector.2.weight", "no projector"), ("model.mm_projector.0.weight", "no projector"),
    ("model.vision_tower.vision_tower.model.conv_exp.reparam_conv.weight", "not an inference-mode FastViT"),
    ("model.vision_tower.vision_tower.model.patch_embed.0.reparam_conv.weight", "not an inference-mode FastViT")])
def test_a_vision_tower_or_projector_without_its_ends_is_refused_by_name(tmp_path, gone, message):
    entries = tuple(e for e in shrunk(MANIFEST.entries) if e.name != gone)
    assert len(entries) == len(shrunk(MANIFEST.entries)) - 1
    with pytest.raises(CheckpointError, match=message):
        vision_arch(open_checkpoint(write_zero_checkpoint(tmp_path, entries, MANIFEST, num_hidden_layers=1)))


@pytest.mark.parametrize("heads", [0, 5, None])
def test_attention_heads_that_do_not_divide_the_query_are_refused(tmp_path, heads):
    ckpt = open_checkpoint(write_zero_checkpoint(tmp_path, shrunk(MANIFEST.entries), MANIFEST, num_hidden_layers=1,
                                                 num_attention_heads=heads))
    with pytest.raises(CheckpointError, match=rf"num_attention_heads \({heads or 0}\) does not divide"):
        text_arch(ckpt)


@pytest.mark.parametrize("flag, head, tied", [(True, True, True), (False, True, False), (False, False, True)])
def test_the_head_is_tied_when_config_says_so_or_the_checkpoint_has_none(tmp_path, flag, head, tied):
    entries = tuple(e for e in shrunk(MANIFEST.entries) if head or e.name != "lm_head.weight")
    assert head or len(entries) == len(shrunk(MANIFEST.entries)) - 1
    ckpt = open_checkpoint(write_zero_checkpoint(tmp_path, entries, MANIFEST, num_hidden_layers=1,
                                                 tie_word_embeddings=flag))
    assert text_arch(ckpt).tied is tied
