"""Accuracy harness: POPE, GQA, TextVQA and OCRBench on local JSONL data (see docs/eval.md)."""

from .convert import convert
from .data import TASKS, DataError, Item, load_items, write_items
from .metrics import normalize_vqa, ocrbench_scores, parse_yes_no, pope_metrics, vqa_accuracy
from .prompts import build_prompt
from .runner import AnswerEngine, ResumeError, RunSettings, evaluate, summarize

__all__ = [
    "TASKS", "AnswerEngine", "DataError", "Item", "ResumeError", "RunSettings", "build_prompt", "convert",
    "evaluate", "load_items", "normalize_vqa", "ocrbench_scores", "parse_yes_no", "pope_metrics",
    "summarize", "vqa_accuracy", "write_items",
]
