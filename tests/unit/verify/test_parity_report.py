"""The parity report's verdict on recorded numbers (no models: the cases are written by hand)."""

from __future__ import annotations

import numpy as np

from fastvlm.verify.compare import CaseResult
from fastvlm.verify.parity import ParityReport


def _case(mode: str, *, cosine: float = 1.0, forced: float = 0.01) -> CaseResult:
    return CaseResult(mode, 0, "square", (1, 2, 3), (1, 2, 3), 0.0, forced, 1.0, 0.0, cosine, 0.5)


def test_a_foreign_vision_encoder_fails_where_the_logits_are_not_gated():
    """check_converted on a 4-bit file gates no logits: the vision cosine must still be judged."""
    report = ParityReport("x (q4_k_m)", 256, 3, (_case("default", cosine=0.007, forced=8.4),), None, True,
                          {"strict": 1e-3})
    assert not report.passed
    assert any("cosine 0.00700" in f for f in report.failures()), report.failures()
    assert "vision cosine >= 0.999" in report.summary()


def test_matching_cases_pass_in_every_mode():
    cases = tuple(_case(m, cosine=0.9999) for m in ("strict", "default", "fast"))
    assert ParityReport("tiny", 256, 3, cases, True, True).passed


def test_nan_fails_every_gate():
    nan = float("nan")
    cases = (CaseResult("strict", 0, "square", (1, 2, 3), (1, 2, 3), nan, 0.0, 1.0, 0.0, 1.0, 0.5),
             _case("default", forced=nan), _case("fast", cosine=nan))
    report = ParityReport("tiny", 256, 3, cases, True, True)
    assert len(report.failures()) == 3, report.failures()
    assert not report.passed


def test_a_nan_step_of_the_forced_logits_is_kept(monkeypatch):
    """run_case's max over the teacher-forced steps: a NaN at step 2 of 3 was dropped by Python's max()."""
    import fastvlm.verify.compare as compare
    from fastvlm.engine.kv import Image, Tokens

    vocab = 8
    ref = [np.arange(vocab, dtype=np.float32) for _ in range(3)]
    monkeypatch.setattr(compare, "reference_greedy", lambda model, ids, pixels, n: ([7, 7, 7], ref,
                                                                                   np.ones((4, 2), np.float32)))

    class Probe:
        parts = (Tokens((1, 2)), Image("k", np.ones((4, 2), np.float32)), Tokens((3,)))
        tokens, logits = [7, 7, 7], [np.arange(vocab, dtype=np.float32)]

        def forced_logits(self, parts, continuation):
            out = [np.arange(vocab, dtype=np.float32) for _ in continuation]
            out[1][:] = np.nan
            return out

    class Engine:
        vision = object()

        def answer(self, request):
            return None

    case = compare.run_case(None, Engine(), Probe(), None, "square", "q", 3, "default", 0, 99, None)
    assert np.isnan(case.forced_logits_diff)
