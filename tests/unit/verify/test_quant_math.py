"""compare_quant's numbers on distributions whose KL and top-1 agreement are known (no llama.cpp: the logits
are given), so a wrong axis or sign in the arithmetic is seen, which a tiny model's small KL would hide."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fastvlm.verify.quant_check as quant_check


def _kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q))


def _given(monkeypatch, reference: np.ndarray, quantized: np.ndarray) -> list:
    calls = []

    def teacher_forced_logits(gguf, prompts, threads=None, token_ids=None):
        calls.append((gguf.name, token_ids))
        logits = reference if gguf.name == "ref.gguf" else quantized
        return [[1, 2, 3]], [logits]

    monkeypatch.setattr(quant_check, "teacher_forced_logits", teacher_forced_logits)
    return calls


def test_kl_and_agreement_are_taken_per_position_over_the_vocabulary(monkeypatch, tmp_path):
    # three positions, each a different distribution: a normalisation over positions instead of tokens, or a
    # sum of KL over the vocabulary's columns, gives other numbers; logits shifted by a constant change nothing
    p = [[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.25, 0.5, 0.25]]
    q = [[0.5, 0.3, 0.2], [0.3, 0.1, 0.6], [0.6, 0.3, 0.1]]
    calls = _given(monkeypatch, np.log(np.array(p)) + 7.0, np.log(np.array(q)) - 3.0)
    check = quant_check.compare_quant(tmp_path / "q.gguf", tmp_path / "ref.gguf", ["x"])
    kls = [_kl(a, b) for a, b in zip(p, q)]
    assert check.positions == 3
    assert check.mean_kl == pytest.approx(sum(kls) / 3, rel=1e-5)
    assert check.max_kl == pytest.approx(max(kls), rel=1e-5)
    assert check.top1_agreement == pytest.approx(2 / 3)  # the last position's most likely token differs
    assert calls == [("ref.gguf", None), ("q.gguf", [[1, 2, 3]])]  # the quantized file reads the reference's ids


def test_log_softmax_survives_large_logits():
    out = quant_check._log_softmax(np.array([[1000.0, 1000.0], [0.0, math.log(3.0)]], np.float32))
    assert np.allclose(np.exp(out), [[0.5, 0.5], [0.25, 0.75]])


def test_different_vocabularies_are_refused(monkeypatch, tmp_path):
    _given(monkeypatch, np.zeros((3, 4)), np.zeros((3, 5)))
    with pytest.raises(ValueError, match=r"different vocabularies \(5 vs 4\)"):
        quant_check.compare_quant(tmp_path / "q.gguf", tmp_path / "ref.gguf", ["x"])
