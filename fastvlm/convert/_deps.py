"""Import the convert extras, or fail with the command that installs them."""

from __future__ import annotations

import importlib

HINT = "pip install -r requirements-convert.txt"


def require(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"`fastvlm convert` and `fastvlm parity` need {module.split('.')[0]}: {HINT}") from e
