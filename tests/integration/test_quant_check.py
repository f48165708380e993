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
