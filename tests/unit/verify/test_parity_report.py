"""The parity report's verdict on recorded numbers (no models: the cases are written by hand)."""

from __future__ import annotations

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
