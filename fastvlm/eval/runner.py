"""Run one task over a dataset: one answer per item, one pass, appended to a resumable results file.

Each answered item becomes one JSONL row, flushed at once:

    {"id", "question", "prediction", "answers", "time_s", "stop_reason",
     "task", "max_new_tokens", "resolution", "model"}   (+ "error": "Type: message" on failure)

A failed request is recorded with `"prediction": null` and counts as wrong; it is never retried,
and no item is ever answered twice. On restart, ids already in the file are skipped, so an
interrupted run continues where it stopped. The summary goes beside it: `x.jsonl` -> `x.summary.json`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..engine.config import GenerationOptions
from ..engine.events import Request, Result
from . import metrics
from .data import DataError, Item, image_path
from .prompts import build_prompt

log = logging.getLogger(__name__)


class AnswerEngine(Protocol):
    """What the harness needs of an engine: one finished answer per request."""

    def answer(self, request: Request) -> Result: ...


class ResumeError(ValueError):
    """An existing results file was made with other settings; the message names it and the fix."""


@dataclass(frozen=True)
class RunSettings:
    task: str
    images_root: Path  # relative image paths are resolved here
    max_new_tokens: int
    resolution: int | None = None  # None: the engine's configured resolution
    model: dict[str, Any] | None = None  # files (path, bytes), quant, vision runtime, CPU: stamped, see `model_stamp`
    machine: dict[str, Any] | None = None  # `bench.stats.machine_info`: written into the summary only

    def stamp(self) -> dict[str, Any]:
        """The settings recorded in each row; a resumed run must match them."""
        out = {"task": self.task, "max_new_tokens": self.max_new_tokens, "resolution": self.resolution}
        return out | ({"model": self.model} if self.model is not None else {})


def model_stamp(vision: Path, llm: Path, quant: str, vision_runtime: str, cpu: str) -> dict[str, Any]:
    """What made the answers: the resolved files with their sizes, the GGUF type asked for, the runtime, the CPU."""
    return {"vision": str(vision), "vision_bytes": Path(vision).stat().st_size, "llm": str(llm),
            "llm_bytes": Path(llm).stat().st_size, "quant": quant, "vision_runtime": vision_runtime, "cpu": cpu}


def summary_path(results: Path) -> Path:
    return results.with_name(results.stem + ".summary.json")


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """Rows already in a results file, by id; unreadable lines (a write cut short) are skipped."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            try:
                row = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:
                row = None
                log.warning("%s line %d is not valid JSON (an interrupted write?); its item will be answered again",
                            path, number)
            if isinstance(row, dict) and "id" in row:
                done.setdefault(str(row["id"]), row)
    return done


def check_resume(done: dict[str, dict[str, Any]], settings: RunSettings, path: Path) -> None:
    stamp = settings.stamp()
    for row in done.values():
        theirs = {k: row[k] for k in stamp if k in row}
        mismatch = {k: v for k, v in theirs.items() if v != stamp[k]}
        if "model" in mismatch:
            raise ResumeError(f"{path} holds answers made with another model or machine "
                              f"({_model_change(mismatch['model'], stamp['model'])}); "
                              "pass another --out, or delete the file to start over")
        if mismatch:
            raise ResumeError(f"{path} holds answers made with {mismatch} (now {stamp}); "
                              "pass another --out, or delete the file to start over")


def _model_change(theirs: dict[str, Any], ours: dict[str, Any]) -> str:
    keys = [k for k in dict.fromkeys([*theirs, *ours]) if theirs.get(k) != ours.get(k)]
    return ", ".join(f"{k} {theirs.get(k)} -> now {ours.get(k)}" for k in keys)


def check_images(items: Sequence[Item], root: Path) -> None:
    """Refuse to start (and record every item as failed) when image files are missing."""
    missing = [image_path(it, root) for it in items if not image_path(it, root).is_file()]
    if missing:
        shown = ", ".join(str(p) for p in missing[:3])
        raise DataError(f"{len(missing)} of {len(items)} images are missing (first: {shown}); "
                        "check --images-root (relative paths are resolved under it)")


def answer_item(engine: AnswerEngine, item: Item, settings: RunSettings) -> dict[str, Any]:
    """Ask once; an exception becomes an error row, never a retry."""
    request = Request(
        image=str(image_path(item, settings.images_root)),
        question=build_prompt(settings.task, item.question),
        options=GenerationOptions(max_new_tokens=settings.max_new_tokens, temperature=0.0),
        resolution=settings.resolution,
    )
    row: dict[str, Any] = {"id": item.id, "question": item.question, "prediction": None,
                           "answers": list(item.answers)}
    start = time.perf_counter()
    try:
        result = engine.answer(request)
        row["prediction"] = result.text
        row["stop_reason"] = result.stats.stop_reason
    except Exception as e:  # noqa: BLE001 - any failure is one wrong answer, recorded
        log.warning("item %s failed: %s: %s", item.id, type(e).__name__, e)
        row["error"] = f"{type(e).__name__}: {e}"
    row["time_s"] = round(time.perf_counter() - start, 4)
    return row | settings.stamp()


def _progress(items: Sequence[Item], enabled: bool) -> Iterable[Item]:
    try:
        from tqdm import tqdm
    except ImportError:  # progress is a nicety; the log still shows failures
        return items
    return tqdm(items, desc="eval", unit="q", disable=not enabled)


def _ends_with_newline(path: Path) -> bool:
    if path.stat().st_size == 0:
        return True
    with path.open("rb") as f:
        f.seek(-1, 2)
        return f.read(1) == b"\n"


def run_pending(engine: AnswerEngine, items: Sequence[Item], results: Path, settings: RunSettings,
                *, progress: bool = True) -> list[dict[str, Any]]:
    """Answer `items` (none of them answered yet), appending and flushing one row each."""
    results.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with results.open("a", encoding="utf-8") as f:
        if not _ends_with_newline(results):  # a write cut short: start on a fresh line
            f.write("\n")
        for item in _progress(items, progress):
            row = answer_item(engine, item, settings)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
            rows.append(row)
    return rows


def evaluate(items: Sequence[Item], results: Path, settings: RunSettings,
             engine_factory: Callable[[], AnswerEngine], *, progress: bool = True) -> dict[str, Any]:
    """Answer the items not yet in `results`, then score all of `items` and write the summary beside it.

    `engine_factory` is called only when something is left to answer; an engine with `close()` is closed.
    """
    done = read_results(results)
    check_resume(done, settings, results)
    pending = [it for it in items if it.id not in done]
    if pending:
        log.info("%d of %d items to answer (%d already in %s)", len(pending), len(items),
                 len(items) - len(pending), results)
        check_images(pending, settings.images_root)
        engine = engine_factory()
        try:
            for row in run_pending(engine, pending, results, settings, progress=progress):
                done[row["id"]] = row
        finally:
            close = getattr(engine, "close", None)
            if callable(close):
                close()
    summary = summarize(settings.task, items, done)
    summary |= {k: v for k, v in (("model", settings.model), ("machine", settings.machine)) if v is not None}
    write_summary(summary, summary_path(results))
    return summary


def _accuracy(scores: list[float]) -> dict[str, Any]:
    return {"n": len(scores), "accuracy": sum(scores) / len(scores) if scores else 0.0}


def summarize(task: str, items: Sequence[Item], done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Scores of `items` from their rows in `done` (items without a row are left out and counted)."""
    scored = [(it, done[it.id].get("prediction")) for it in items if it.id in done]
    preds = [p for _, p in scored]
    out: dict[str, Any] = {"task": task, "n": len(scored), "not_answered": len(items) - len(scored),
                           "errors": sum(p is None for p in preds)}
    groups: dict[str, list[int]] = defaultdict(list)
    for i, (it, _) in enumerate(scored):
        groups[it.category or ""].append(i)
    per_category = len(groups) > 1 or "" not in groups
    if task == "pope":
        labels = [it.label or it.answers[0] for it, _ in scored]
        out["metrics"] = metrics.pope_metrics(preds, labels)
        if per_category:
            out["by_category"] = {c: metrics.pope_metrics([preds[i] for i in ix], [labels[i] for i in ix])
                                  for c, ix in groups.items()}
    elif task == "ocrbench":
        ocr = metrics.ocrbench_scores(preds, [it.answers for it, _ in scored], [it.category or "" for it, _ in scored])
        out["metrics"] = {"total": ocr["total"], "n": ocr["n"], "groups": ocr["groups"]}
        out["by_category"] = ocr["by_category"]
    else:
        if task == "textvqa":
            scores = [metrics.vqa_accuracy(p, it.answers) for it, p in scored]
        else:
            scores = [float(metrics.gqa_correct(p, it.answers)) for it, p in scored]
        out["metrics"] = _accuracy(scores)
        if per_category:
            out["by_category"] = {c: _accuracy([scores[i] for i in ix]) for c, ix in groups.items()}
    return out


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


_CATEGORY_COLUMNS = ("n", "accuracy", "f1", "yes_ratio", "unparsed")


def format_summary(summary: dict[str, Any]) -> str:
    """A plain-text table of a `summarize()` result."""
    lines = [f"task {summary['task']}: {summary['n']} scored, {summary['errors']} failed, "
             f"{summary['not_answered']} not answered"]
    for key, value in summary["metrics"].items():
        if isinstance(value, dict):
            lines += [f"  {key}:"] + [f"    {k:<50} {_fmt(v)}" for k, v in value.items()]
        else:
            lines.append(f"  {key:<52} {_fmt(value)}")
    by_category = summary.get("by_category", {})
    if by_category:
        lines.append("  by category:")
    for cat, value in sorted(by_category.items()):
        if isinstance(value, dict):
            value = "  ".join(f"{k}={_fmt(v)}" for k, v in value.items() if k in _CATEGORY_COLUMNS)
        lines.append(f"    {cat or '(none)':<50} {_fmt(value)}")
    return "\n".join(lines)


def write_summary(summary: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
