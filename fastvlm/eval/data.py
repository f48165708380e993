"""The local evaluation format: one JSON object per line (JSONL).

Each line describes one question about one image:

    {"id": "q1",                     # str, unique within the file
     "image": "COCO_val2014_1.jpg",  # relative (to --images-root, else the data file's folder) or absolute
     "question": "Is there a dog?",  # the bare question; the task's prompt suffix is added at run time
     "answers": ["yes"],             # ground truth: 1 for POPE/GQA, usually 10 for TextVQA, 1+ for OCRBench
     "category": "adversarial",      # optional (required for OCRBench: its question type)
     "label": "yes"}                 # POPE only: "yes" or "no"; `answers` may then be omitted

Blank lines are skipped. A malformed line stops loading with a `DataError`
that names the file and line. `fastvlm.eval.convert` writes this format
from each public dataset's own layout.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable
from typing import Any

TASKS = ("pope", "gqa", "textvqa", "ocrbench")


class DataError(ValueError):
    """A data or source file is unusable; the message names the file, the line or item, and what is wrong."""


@dataclass(frozen=True)
class Item:
    """One evaluation question."""

    id: str
    image: str  # as written in the file; see `image_path`
    question: str
    answers: tuple[str, ...]
    category: str | None = None
    label: str | None = None  # POPE: "yes" / "no"

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"id": self.id, "image": self.image, "question": self.question,
                               "answers": list(self.answers)}
        if self.category is not None:
            row["category"] = self.category
        if self.label is not None:
            row["label"] = self.label
        return row


def image_path(item: Item, root: Path) -> Path:
    """The item's image file: absolute paths as they are, relative ones under `root`."""
    path = Path(item.image).expanduser()
    return path if path.is_absolute() else root / path


def _string(obj: dict[str, Any], key: str, *, required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "id":
        return str(value)  # numeric ids are common in the public sets
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(f'"{key}" must be a non-empty string, got {value!r}')
    return value


def parse_item(obj: Any, task: str | None = None) -> Item:
    """Validate one decoded line; raises ValueError saying which field is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    label = _string(obj, "label", required=False)
    if label is not None:
        label = label.strip().lower()
        if label not in ("yes", "no"):
            raise ValueError(f'"label" must be "yes" or "no", got {obj["label"]!r}')
    if task == "pope" and label is None:
        raise ValueError('POPE items need "label": "yes" or "no"')
    answers = obj.get("answers", [label] if label is not None else None)
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise ValueError(f'"answers" must be a non-empty list of strings, got {answers!r}')
    category = _string(obj, "category", required=False)
    if task == "ocrbench" and category is None:
        raise ValueError('OCRBench items need "category" (the question type, e.g. "Scene Text-centric VQA")')
    return Item(
        id=_string(obj, "id"),  # type: ignore[arg-type]
        image=_string(obj, "image"),  # type: ignore[arg-type]
        question=_string(obj, "question"),  # type: ignore[arg-type]
        answers=tuple(answers),
        category=category,
        label=label,
    )


def load_items(path: str | Path, task: str | None = None) -> list[Item]:
    """Read a local-format JSONL file; `task` adds that task's required fields to the checks."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such data file (write one with `python -m fastvlm eval-convert`)")
    items: list[Item] = []
    first_line: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                item = parse_item(json.loads(line), task)
            except json.JSONDecodeError as e:
                raise DataError(f"{path} line {number}: not valid JSON ({e.msg} at column {e.colno})") from None
            except ValueError as e:
                raise DataError(f"{path} line {number}: {e}") from None
            if item.id in first_line:
                raise DataError(f"{path} line {number}: id {item.id!r} already used on line {first_line[item.id]}")
            first_line[item.id] = number
            items.append(item)
    return items


def write_items(items: Iterable[Item], path: str | Path) -> int:
    """Write items as local-format JSONL; returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
            count += 1
    return count
