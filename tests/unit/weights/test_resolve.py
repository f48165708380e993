"""fastvlm.weights.resolve's look-only mode: the app's start-up check takes files that are ready, nothing else."""

from __future__ import annotations

import importlib

import pytest

from fastvlm.engine.events import ModelFileError
from fastvlm.weights import Hub, resolve

resolve_module = importlib.import_module("fastvlm.weights.resolve")  # the package re-exports the function


def test_look_only_neither_downloads_converts_nor_falls_back(monkeypatch):
    calls = []

    def converted(repo, hub, quant, download, threads, report, convert):
        calls.append((download, convert))
        raise ModelFileError(f"{repo} is not converted yet")

    monkeypatch.setattr(resolve_module.official, "converted", converted)
    monkeypatch.setattr(resolve_module, "_prebuilt", lambda *a: pytest.fail("fell back to the prebuilt files"))
    with pytest.raises(ModelFileError, match="not converted yet"):
        resolve(look_only=True, hub=Hub())
    assert calls == [(False, False)]
