"""Converters from each public benchmark's own file layout to the local JSONL format.

Nothing is downloaded: point `--src` at files you already have.

- POPE (`coco_pope_{random,popular,adversarial}.json`, JSONL despite the name):
  `{"question_id", "image", "text", "label"}` per line. The category is the
  line's own `"category"`, else `category=`, else guessed from the file name;
  ids are `<category>/<question_id>` so that the three files can be combined.
- GQA balanced questions (`testdev_balanced_questions.json`):
  `{qid: {"imageId", "question", "answer", "types": {"structural", ...}}}`;
  the image is `<imageId>.jpg`, the category the structural type.
- TextVQA (`TextVQA_0.5.1_val.json`): `{"data": [{"question_id", "image_id",
  "question", "answers": [10 strings]}]}`; the image is `<image_id>.jpg`.
- OCRBench (`OCRBench.json`): `[{"id"?, "image_path", "question", "answers"
  (a string or a list), "type"}]`; the category is `type`.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

from .data import DataError, Item, parse_item

POPE_CATEGORIES = ("adversarial", "popular", "random")


def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise DataError(f"{path}: no such source file") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


def _checked(path: Path, where: str, obj: dict[str, Any], task: str) -> Item:
    try:
        return parse_item(obj, task)
    except (ValueError, TypeError) as e:
        raise DataError(f"{path} {where}: {e}") from None


def _field(path: Path, where: str, record: Any, key: str) -> Any:
    if not isinstance(record, dict) or key not in record:
        raise DataError(f"{path} {where}: missing {key!r}")
    return record[key]


def pope_items(path: Path, category: str | None = None) -> Iterator[Item]:
    """POPE: JSONL (one question per line); a whole-file JSON list is accepted too."""
    if category is None:
        category = next((c for c in POPE_CATEGORIES if c in path.name.lower()), None)
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if stripped.startswith("["):
        records = [(f"item {i}", r) for i, r in enumerate(_read_json(path))]
    else:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append((f"line {number}", json.loads(line)))
                except json.JSONDecodeError as e:
                    raise DataError(f"{path} line {number}: not valid JSON ({e.msg})") from None
    for where, r in records:
        qid = _field(path, where, r, "question_id")
        cat = r.get("category", category)
        obj = {
            "id": f"{cat}/{qid}" if cat else qid,
            "image": _field(path, where, r, "image"),
            "question": _field(path, where, r, "text"),
            "label": _field(path, where, r, "label"),
            "category": cat,
        }
        yield _checked(path, where, obj, "pope")


def gqa_items(path: Path) -> Iterator[Item]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected GQA's {{question_id: question}} object, got {type(data).__name__}")
    for qid, r in data.items():
        where = f"question {qid!r}"
        types = r.get("types") if isinstance(r, dict) else None
        obj = {
            "id": str(qid),
            "image": f"{_field(path, where, r, 'imageId')}.jpg",
            "question": _field(path, where, r, "question"),
            "answers": [_field(path, where, r, "answer")],
            "category": types.get("structural") if isinstance(types, dict) else None,
        }
        yield _checked(path, where, obj, "gqa")


def textvqa_items(path: Path) -> Iterator[Item]:
    data = _read_json(path)
    records = data.get("data") if isinstance(data, dict) else None
    if not isinstance(records, list):
        raise DataError(f'{path}: expected TextVQA\'s {{"data": [...]}} object')
    for i, r in enumerate(records):
        where = f"data[{i}]"
        obj = {
            "id": _field(path, where, r, "question_id"),
            "image": f"{_field(path, where, r, 'image_id')}.jpg",
            "question": _field(path, where, r, "question"),
            "answers": _field(path, where, r, "answers"),
        }
        yield _checked(path, where, obj, "textvqa")


def ocrbench_items(path: Path) -> Iterator[Item]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected OCRBench's JSON list of questions, got {type(data).__name__}")
    for i, r in enumerate(data):
        where = f"item {i}"
        answers = _field(path, where, r, "answers")
        obj = {
            "id": r.get("id", i),
            "image": _field(path, where, r, "image_path"),
            "question": _field(path, where, r, "question"),
            "answers": [answers] if isinstance(answers, str) else answers,
            "category": _field(path, where, r, "type"),
        }
        yield _checked(path, where, obj, "ocrbench")


CONVERTERS: dict[str, Callable[[Path], Iterator[Item]]] = {
    "pope": pope_items,
    "gqa": gqa_items,
    "textvqa": textvqa_items,
    "ocrbench": ocrbench_items,
}


def convert(task: str, sources: list[str | Path], category: str | None = None) -> list[Item]:
    """Read each source file in `task`'s public layout, in order; `category` applies to POPE only."""
    if task not in CONVERTERS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(CONVERTERS)}")
    items: list[Item] = []
    seen: dict[str, Path] = {}
    for src in map(Path, sources):
        if not src.is_file():
            raise DataError(f"{src}: no such source file")
        for item in pope_items(src, category) if task == "pope" else CONVERTERS[task](src):
            if item.id in seen:
                raise DataError(f"{src}: id {item.id!r} already used in {seen[item.id]}")
            seen[item.id] = src
            items.append(item)
    return items
