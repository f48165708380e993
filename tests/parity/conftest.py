"""Parity fixtures: random FastVLMs converted once per session (needs requirements-convert.txt)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_parity(tmp_path_factory):
    """(report, work folder) of the tiny parity run: seeds 0-2; strict, default and fast mode."""
    pytest.importorskip("torch")
    pytest.importorskip("timm")
    from fastvlm.verify.parity import run_parity

    work = tmp_path_factory.mktemp("parity-tiny")
    return run_parity("tiny", seeds=(0, 1, 2), modes=("strict", "default", "fast"), new_tokens=16, work_dir=work), work
