"""The parity report's verdict on recorded numbers (no models: the cases are written by hand)."""

from __future__ import annotations

import numpy as np
import pytest

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


def _run_case(monkeypatch, ref_logits, forced, *, emb, feats, engine_tokens=(7, 7, 7), first=None):
    """`run_case` on recorded arrays: transformers' side gives `ref_logits` and `feats`, ours `forced` and `emb`."""
    import fastvlm.verify.compare as compare
    from fastvlm.engine.kv import Image, Tokens

    ref_tokens = [int(lg.argmax()) for lg in ref_logits]
    monkeypatch.setattr(compare, "reference_greedy", lambda model, ids, pixels, n: (ref_tokens, ref_logits, feats))

    class Probe:
        parts = (Tokens((1, 2)), Image("k", emb), Tokens((3,)))
        tokens, logits = list(engine_tokens), [ref_logits[0] if first is None else first]

        def forced_logits(self, parts, continuation):
            assert list(continuation) == ref_tokens  # teacher-forced on transformers' tokens
            return forced

    class Engine:
        vision = object()

        def answer(self, request):
            return None

    return compare.run_case(None, Engine(), Probe(), None, "square", "q", len(ref_logits), "default", 0, 99, None)


def test_a_nan_step_of_the_forced_logits_is_kept(monkeypatch):
    """run_case's max over the teacher-forced steps: a NaN at step 2 of 3 was dropped by Python's max()."""
    ref = [np.arange(8, dtype=np.float32) for _ in range(3)]
    forced = [np.arange(8, dtype=np.float32) for _ in range(3)]
    forced[1][:] = np.nan
    case = _run_case(monkeypatch, ref, forced, emb=np.ones((4, 2), np.float32), feats=np.ones((4, 2), np.float32))
    assert np.isnan(case.forced_logits_diff)


def test_run_case_measures_each_number_the_gates_read(monkeypatch):
    """Cosine, logit differences, top-1 agreement and the reference's smallest margin, on arrays whose values
    are known: a cosine of 1/sqrt(2), one forced step with another argmax, one step decided by 0.25."""
    ref = [np.array(row, np.float32) for row in ([0, 1, 3, 2], [0, 2, 1, 2.25], [5, 0, 0, 0])]
    forced = [r.copy() for r in ref]
    forced[1] = np.array([0, 3, 1, 2], np.float32)  # argmax 1, not 3; largest difference 1.0
    first = ref[0] + np.array([0, 0, 0.5, 0], np.float32)
    emb = np.array([[1.0, 0.0]], np.float32)
    feats = np.array([[2.0, 2.0]], np.float32)  # cosine 1/sqrt(2) whatever the lengths; max |diff| 2
    case = _run_case(monkeypatch, ref, forced, emb=emb, feats=feats, first=first)
    assert case.reference_tokens == (2, 3, 0)
    assert case.vision_cosine == pytest.approx(2 ** -0.5, abs=1e-6)
    assert case.vision_diff == pytest.approx(2.0)
    assert case.first_logits_diff == pytest.approx(0.5)
    assert case.forced_logits_diff == pytest.approx(1.0)
    assert case.forced_top1_agree == pytest.approx(2 / 3)
    assert case.min_margin == pytest.approx(0.25)  # top-1 minus top-2 of the closest step: 2.25 - 2


@pytest.mark.parametrize("engine, agreed", [((1, 2, 3), 3), ((1, 2, 4), 2), ((9, 2, 3), 0), ((1, 2), 2)])
def test_tokens_agree_up_to_the_first_difference(engine, agreed):
    case = CaseResult("strict", 0, "square", (1, 2, 3), engine, 0.0, 0.0, 1.0, 0.0, 1.0, 0.5)
    assert case.agreed == agreed
    report = ParityReport("tiny", 256, 3, (case,), True, True)
    assert report.passed is (agreed == 3)
    if agreed < 3:
        assert f"tokens agree for {agreed} of 3" in " ".join(report.failures())


@pytest.mark.parametrize("mode, first, forced, cosine, passed", [
    ("strict", 1e-3, 0.0, 1.0, True), ("strict", 1.1e-3, 0.0, 1.0, False),  # first-step logits within 1e-3
    ("default", 0.0, 0.1, 1.0, True), ("default", 0.0, 0.11, 1.0, False),  # teacher-forced logits within 0.1
    ("fast", 0.0, 0.0, 0.999, True), ("fast", 0.0, 0.0, 0.9989, False)])  # image embeddings' cosine >= 0.999
def test_the_gates_are_the_documented_ones_and_take_their_limits(mode, first, forced, cosine, passed):
    case = CaseResult(mode, 0, "square", (1, 2, 3), (1, 2, 3), first, forced, 1.0, 0.0, cosine, 0.5)
    assert ParityReport("tiny", 256, 3, (case,), True, True).passed is passed


def test_the_default_mode_runs_as_the_app_does():
    """Parity's default mode is the app's configuration: its KV cache type and flash attention are EngineConfig's
    defaults (a default mode in f32 KV would pass parity while the app runs f16)."""
    from fastvlm.engine.config import EngineConfig
    from fastvlm.verify.parity import MODES

    app = EngineConfig(vision_path="v.onnx", llm_path="m.gguf")
    for mode in ("default", "fast"):
        _, kv_f32, flash, _ = MODES[mode]
        assert (kv_f32, flash) == (app.kv_f32, app.flash_attn), mode
    assert MODES["strict"][1:3] == (True, False)  # strict: f32 KV, flash attention off
