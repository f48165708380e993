"""Parity with the real FastViTHD vision tower (random weights) and a tiny text model."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("timm")


@pytest.mark.slow
def test_full_vision_parity(tmp_path):
    from fastvlm.verify.parity import run_parity

    report = run_parity("full-vision", seeds=(0,), modes=("strict", "default", "fast"), new_tokens=16,
                        work_dir=tmp_path)
    assert report.passed, report.summary()
    assert len(report.cases) == 6
    assert all(c.agreed == 16 for c in report.cases if c.mode == "strict")
    assert max(c.vision_diff for c in report.cases if c.mode != "fast") < 1e-3
    assert min(c.vision_cosine for c in report.cases) >= 0.999
