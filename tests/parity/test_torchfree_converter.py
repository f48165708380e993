"""The torch-free converter on a random checkpoint in Apple's exact layout, against transformers' FastVLM.

The conversion runs in a child process that must not import torch, timm or transformers; the reference
(`FastVlmForConditionalGeneration` loaded from the same bf16 safetensors) runs here with torch.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("timm")

REL_GATE = 1e-4
CONVERT_WITHOUT_TORCH = """
import json, sys
from pathlib import Path
from fastvlm.convert.build import convert_checkpoint
stages = []
vision, llm = convert_checkpoint(Path(sys.argv[1]), Path(sys.argv[2]), quant=sys.argv[3], progress=stages.append)
heavy = sorted(m for m in ("torch", "timm", "transformers") if m in sys.modules)
print(json.dumps({"vision": str(vision), "llm": str(llm), "stages": stages, "heavy": heavy}))
"""


def convert_in_child(checkpoint, out, quant):
    done = subprocess.run([sys.executable, "-c", CONVERT_WITHOUT_TORCH, str(checkpoint), str(out), quant],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def converted(apple_checkpoint, tmp_path_factory):
    return convert_in_child(apple_checkpoint, tmp_path_factory.mktemp("apple-f32"), "f32")


@pytest.fixture(scope="module")
def reference(apple_checkpoint):
    from fastvlm.convert.checkpoint import open_checkpoint
    from fastvlm.verify.reference import load_reference_model

    return load_reference_model(open_checkpoint(apple_checkpoint))


def test_conversion_imports_no_torch_and_reports_its_stages(converted):
    assert converted["heavy"] == []
    assert converted["stages"][:3] == ["reading checkpoint", "converting vision", "writing language model"]
    assert converted["vision"].endswith("vision.onnx") and converted["llm"].endswith("llm.gguf")


def test_checkpoint_is_in_apple_layout(apple_checkpoint):
    from fastvlm.convert.manifest import load_manifest
    from fastvlm.convert.safetensors_np import read_header

    names = {p.name for p in apple_checkpoint.iterdir()}
    assert {"vocab.json", "merges.txt", "added_tokens.json", "tokenizer_config.json", "model.safetensors"} <= names
    assert "tokenizer.json" not in names
    cfg = json.loads((apple_checkpoint / "config.json").read_text())
    assert cfg["model_type"] == "llava_qwen2" and cfg["mm_projector_type"] == "mlp2x_gelu"
    manifest = load_manifest()  # apple/FastVLM-0.5B's tensors, from Apple's model code
    assert cfg["image_aspect_ratio"] == "pad" and "auto_map" in cfg
    assert cfg["tie_word_embeddings"] is manifest.config["tie_word_embeddings"] is False
    assert "<image>" not in json.loads((apple_checkpoint / "vocab.json").read_text())
    header = read_header(apple_checkpoint / "model.safetensors")
    dtypes = {e.name: e.dtype for e in manifest.entries}
    assert set(header) <= set(dtypes) and all(info.dtype == dtypes[k] for k, info in header.items())
    assert "lm_head.weight" in header and "model.vision_tower.vision_tower.model.head.proj" in header


def _vision_rel_diff(reference, vision_path, h, w):
    import onnxruntime as ort

    x = torch.rand((1, 3, h, w), generator=torch.Generator().manual_seed(h * 7 + w))
    with torch.no_grad():
        want = reference.model.get_image_features(pixel_values=x).pooler_output.numpy()  # (1, N, D)
    session = ort.InferenceSession(vision_path, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {"pixel_values": x.numpy()})
    assert got.shape == want.shape == (1, (h // 64) * (w // 64), reference.config.text_config.hidden_size)
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("h,w", [(256, 256), (512, 512), (256, 448)])
def test_vision_onnx_matches_reference(converted, reference, h, w):
    assert _vision_rel_diff(reference, converted["vision"], h, w) <= REL_GATE


@pytest.mark.slow
def test_vision_onnx_matches_reference_at_1024(converted, reference):
    assert _vision_rel_diff(reference, converted["vision"], 1024, 1024) <= REL_GATE


def _greedy(reference, converted, apple_checkpoint, resolution):
    from pathlib import Path

    from fastvlm.verify.parity import _cases, tokenizer_agrees

    image_id = reference.config.image_token_id
    cases, ids = _cases(reference, {"f32": Path(converted["llm"])}, Path(converted["vision"]), "strict", resolution,
                        0, 12, image_id, threads=2)
    assert tokenizer_agrees(apple_checkpoint, ids)  # Apple's slow-tokenizer files == llama.cpp on the GGUF
    return cases


@pytest.mark.parametrize("resolution", [512, pytest.param(1024, marks=pytest.mark.slow)])
def test_greedy_tokens_equal_transformers(converted, reference, apple_checkpoint, resolution):
    cases = _greedy(reference, converted, apple_checkpoint, resolution)
    assert [c.image for c in cases] == ["square", "wide"]
    for c in cases:
        assert c.engine_tokens == c.reference_tokens, (c.image, c.engine_tokens, c.reference_tokens)
        assert c.first_logits_diff <= 1e-3
    assert cases[0].reference_tokens != cases[1].reference_tokens  # the image matters: the check can fail


def test_bf16_gguf_keeps_the_checkpoint_bits(apple_checkpoint, tmp_path):
    import gguf

    from fastvlm.convert.safetensors_np import load, read_header

    out = convert_in_child(apple_checkpoint, tmp_path, "bf16")
    assert out["heavy"] == []
    reader = gguf.GGUFReader(out["llm"])
    assert reader.fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_BF16  # what it says it holds
    tensors = {t.name: t for t in reader.tensors}
    q = tensors["blk.0.attn_q.weight"]
    assert q.tensor_type == gguf.GGMLQuantizationType.BF16
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    want = np.asarray(load(read_header(apple_checkpoint / "model.safetensors")[q_proj]))
    assert np.array_equal(np.asarray(q.data).view(np.uint16).reshape(want.shape), want)
    assert tensors["blk.0.attn_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
