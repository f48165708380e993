"""compare_quant: a GGUF against itself agrees everywhere; a quantized one pays a measurable KL."""

from __future__ import annotations

import pytest


def test_a_file_against_itself_and_against_its_q8_0(tiny_models, tmp_path):
    from fastvlm.convert.text_gguf import quantize
    from fastvlm.verify.quant_check import PROMPTS, compare_quant

    same = compare_quant(tiny_models.llm, tiny_models.llm, PROMPTS[:2], threads=2)
    assert same.positions > 40 and same.top1_agreement == 1.0 and same.mean_kl == pytest.approx(0.0, abs=1e-9)
    q8 = tmp_path / "llm-q8_0.gguf"
    quantize(tiny_models.llm, q8, "q8_0", threads=2)
    check = compare_quant(q8, tiny_models.llm, PROMPTS[:2], threads=2)
    assert check.positions == same.positions
    assert 0.0 < check.mean_kl < 0.05 and check.max_kl >= check.mean_kl  # close, but not the same numbers
    assert check.top1_agreement >= 0.8
    assert "llm-q8_0.gguf vs llm.gguf" in check.summary()


def test_q4_0_is_written_by_llama_cpp_and_doctor_gates_it_like_the_others(tiny_models, tmp_path):
    """`--quant q4_0`: llama.cpp's Q4_0 matrices, measured against the reference as Q8_0 is; on the tiny
    model it loses far more than Q8_0 and doctor's gate says so (on the real shape: docs/performance.md)."""
    import gguf

    from fastvlm.convert.text_gguf import quantize
    from fastvlm.verify.doctor import checks
    from fastvlm.verify.doctor.report import Section
    from fastvlm.verify.quant_check import PROMPTS, compare_quant

    found = {}
    for quant in ("q8_0", "q4_0"):
        path = tmp_path / f"llm-{quant}.gguf"
        quantize(tiny_models.llm, path, quant, threads=2)
        found[quant] = compare_quant(path, tiny_models.llm, PROMPTS[:2], threads=2)
    types = {t.name: t.tensor_type.name for t in gguf.GGUFReader(tmp_path / "llm-q4_0.gguf").tensors}
    assert {types[f"blk.{i}.{m}.weight"] for i in (0, 1) for m in ("attn_q", "ffn_up", "ffn_down")} == {"Q4_0"}
    assert types["blk.0.attn_norm.weight"] == "F32"
    q8, q4 = found["q8_0"], found["q4_0"]
    assert q4.positions == q8.positions and q4.mean_kl > 5 * q8.mean_kl and q4.top1_agreement < q8.top1_agreement
    for quant, want in (("q8_0", "ok"), ("q4_0", "fail")):
        s = Section("Quantization")
        checks.quant_check(tmp_path / f"llm-{quant}.gguf", tiny_models.llm, s,
                           compare=lambda *a, quant=quant, **k: found[quant])
        assert s.checks[0].status == want, s.checks[0].detail
        assert f"llm-{quant}.gguf vs llm.gguf" in s.checks[0].detail


def test_the_prompts_chatml_markers_are_read_as_the_models_special_tokens(tiny_models):
    """Both files must see `<|im_start|>` as the one token the model was trained on, not as its letters."""
    from fastvlm.verify.quant_check import teacher_forced_logits

    ids, logits = teacher_forced_logits(tiny_models.llm, ["<|im_start|>user\nhi<|im_end|>"], threads=2)
    plain, _ = teacher_forced_logits(tiny_models.llm, ["user\nhi"], threads=2)
    assert len(ids[0]) == len(plain[0]) + 2, (ids, plain)  # each marker one id
    assert logits[0].shape[0] == len(ids[0])  # a distribution at every position
