"""The converter's outputs: the ONNX contract the engine expects, the GGUF metadata, quantized files, the CLI."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("timm")


def test_vision_onnx_contract(tiny_parity):
    import onnx
    import onnxruntime as ort

    from fastvlm.engine.vision import onnx_io, read_spec

    _, work = tiny_parity
    path = work / "tiny-0" / "out" / "vision.onnx"
    model = onnx.load(str(path))
    dims = [d.dim_value or d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]
    assert model.graph.input[0].name == "pixel_values" and dims == [1, 3, "height", "width"]
    out_dims = [d.dim_value or d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert out_dims[0] == 1 and out_dims[2] == 64
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    spec = read_spec(path, *onnx_io(session))
    assert (spec.input_name, spec.embed_dim, spec.fixed_size) == ("pixel_values", 64, None)
    for h, w in ((128, 128), (128, 192), (320, 320)):  # dynamic H and W
        (out,) = session.run(None, {"pixel_values": np.random.rand(1, 3, h, w).astype(np.float32)})
        assert out.shape == (1, (h // 64) * (w // 64), 64) and out.dtype == np.float32


def test_gguf_metadata(tiny_parity):
    import gguf

    _, work = tiny_parity
    reader = gguf.GGUFReader(str(work / "tiny-0" / "out" / "llm.gguf"))

    def field(name):
        f = reader.fields[name]
        return f.contents()

    assert field("general.architecture") == "qwen2"
    assert field("tokenizer.ggml.model") == "gpt2" and field("tokenizer.ggml.pre") == "qwen2"
    tokens, types = field("tokenizer.ggml.tokens"), field("tokenizer.ggml.token_type")
    eos = field("tokenizer.ggml.eos_token_id")
    assert tokens[eos] == "<|im_end|>"
    for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"):
        assert types[tokens.index(special)] == gguf.TokenType.CONTROL
    assert "<|im_start|>" in field("tokenizer.chat_template")
    assert field("tokenizer.ggml.add_bos_token") is False  # llama.cpp must put no <|endoftext|> before the prompt
    assert gguf.TokenType.UNUSED in types and gguf.TokenType.BYTE not in types  # the embedding rows past the vocab
    assert field("general.file_type") == gguf.LlamaFileType.ALL_F32
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "output_norm.weight", "blk.1.attn_q.bias", "blk.1.ffn_down.weight"} <= names
    assert "output.weight" not in names  # tiny ties its head to the embeddings
    assert all(t.tensor_type == gguf.GGMLQuantizationType.F32 for t in reader.tensors)


def test_quantized_files_load_and_answer(tiny_parity, tmp_path):
    from fastvlm import EngineConfig, GenerationOptions, Request
    from fastvlm.convert.build import convert_quants
    from fastvlm.convert.int8 import sample_images
    from fastvlm.engine.engine import Engine

    _, work = tiny_parity
    out = tmp_path / "new" / "folder"  # made, parents and all
    vision, llms = convert_quants(work / "tiny-0" / "checkpoint", out, ("Q8_0", "q4_k_m", "iq4_nl", "q4_0"))
    assert set(llms) == {"q8_0", "q4_k_m", "iq4_nl", "q4_0"} and vision.parent == out
    assert llms["q8_0"].name == "llm.gguf" and llms["q4_k_m"].name == "llm-q4_k_m.gguf"
    assert not list(out.glob("*.tmp"))
    config = EngineConfig(vision_path=vision, llm_path=llms["q4_k_m"], resolution=128, threads=2)
    engine = Engine.load(config, warm_up=False)
    try:
        result = engine.answer(Request(sample_images()["wide"], "Hi", options=GenerationOptions(max_new_tokens=4)))
    finally:
        engine.close()
    assert result.stats.new_tokens == 4


def test_unknown_quant_is_refused(tmp_path):
    from fastvlm.convert.build import convert_checkpoint

    with pytest.raises(ValueError, match="--quant"):
        convert_checkpoint(tmp_path, tmp_path, "q2_k")


def test_convert_command_ends_with_a_passing_parity_check(tiny_parity, tmp_path, capsys):
    from fastvlm.cli import convert as cli

    _, work = tiny_parity
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args([str(work / "tiny-1" / "checkpoint"), "--out", str(tmp_path), "--quant", "f16",
                              "--resolution", "256"])
    assert cli.run(args) == 0
    out = capsys.readouterr().out
    assert "vision:" in out and "llm f16" in out and out.rstrip().endswith("PASS")


def test_random_model_is_determined_by_its_seed():
    from fastvlm.synth import random_model

    a, _ = random_model.build("tiny", 3)
    b, _ = random_model.build("tiny", 3)
    c, _ = random_model.build("tiny", 4)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    key = "model.multi_modal_projector.linear_1.weight"
    assert not torch.equal(sa[key], sc[key])


def test_check_converted_gates_q8_0_and_a_foreign_vision_encoder(tiny_parity, tmp_path):
    """`convert`'s check on a Q8_0 file (what --quant auto writes): its own files pass the Q8_0 logits gate;
    another model's vision.onnx fails on the image embeddings' cosine (it passed: only the tokenizer was judged)."""
    from fastvlm.convert.build import convert_quants
    from fastvlm.verify.parity import QUANT_LOGITS, check_converted

    _, work = tiny_parity
    checkpoint = work / "tiny-0" / "checkpoint"
    vision, llms = convert_quants(checkpoint, tmp_path, ("q8_0",))
    own = check_converted(checkpoint, vision, llms["q8_0"], "q8_0", 256)
    assert own.passed and own.gates["default"] == QUANT_LOGITS == 3.0, own.summary()
    foreign = check_converted(checkpoint, work / "tiny-1" / "out" / "vision.onnx", llms["q8_0"], "q8_0", 256)
    assert not foreign.passed
    assert any("cosine" in f for f in foreign.failures()), foreign.summary()
