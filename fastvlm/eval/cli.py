"""`python -m fastvlm eval` and `python -m fastvlm eval-convert`: flags onto the harness.

The model flags and the subcommands themselves are wired by `fastvlm/__main__.py`, which passes
`run()` a factory that builds the engine from the parsed flags.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from collections.abc import Callable

from ..engine.config import check_resolution
from .convert import convert
from .data import TASKS, DataError, load_items, write_items
from .prompts import PROMPTS
from .runner import AnswerEngine, ResumeError, RunSettings, evaluate, format_summary, summary_path

log = logging.getLogger(__name__)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _resolution(text: str) -> int:
    try:
        return check_resolution(int(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `eval` flags. `--resolution` is added only if the model flags do not already have it."""
    parser.add_argument("--task", required=True, choices=TASKS, help="benchmark whose prompt and metric to use")
    parser.add_argument("--data", required=True, type=Path, help="local-format JSONL (see docs/eval.md)")
    parser.add_argument("--images-root", type=Path, default=None,
                        help="folder for relative image paths (default: the data file's folder)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results JSONL, resumed if it exists (default: eval-results/<task>-<data name>.jsonl)")
    parser.add_argument("--limit", type=_positive_int, default=None, help="only the first N items of the data file")
    parser.add_argument("--max-tokens", type=_positive_int, default=None,
                        help="answer budget in tokens (default per task: " +
                             ", ".join(f"{t} {p.max_new_tokens}" for t, p in PROMPTS.items()) + ")")
    if "--resolution" not in parser._option_string_actions:  # noqa: SLF001 - the model flags may own it
        parser.add_argument("--resolution", type=_resolution, default=None,
                            help="image size, a multiple of 64 (default: the engine's)")


def default_out(task: str, data: Path) -> Path:
    return Path("eval-results") / f"{task}-{data.stem}.jsonl"


def run(args: argparse.Namespace, engine_factory: Callable[[argparse.Namespace], AnswerEngine],
        model: dict | None = None, machine: dict | None = None) -> int:
    """Run `eval`; returns the exit status. The engine is built only if some item is left to answer.
    `model` (`runner.model_stamp`) is stamped on each answer and a resume must match it; `machine` goes
    into the summary."""
    data: Path = args.data
    out: Path = args.out or default_out(args.task, data)
    settings = RunSettings(
        task=args.task,
        images_root=args.images_root or data.parent,
        max_new_tokens=args.max_tokens or PROMPTS[args.task].max_new_tokens,
        resolution=getattr(args, "resolution", None),
        model=model,
        machine=machine,
    )
    try:
        items = load_items(data, args.task)[: args.limit]
        summary = evaluate(items, out, settings, lambda: engine_factory(args))
    except (DataError, ResumeError) as e:
        log.error("%s", e)
        return 2
    print(format_summary(summary))
    print(f"results: {out}\nsummary: {summary_path(out)}")
    return 0


def add_convert_arguments(parser: argparse.ArgumentParser) -> None:
    """The `eval-convert` flags."""
    parser.add_argument("--task", required=True, choices=TASKS, help="layout of the source file(s)")
    parser.add_argument("--src", required=True, nargs="+", type=Path,
                        help="the benchmark's own file(s), e.g. the three coco_pope_*.json")
    parser.add_argument("--out", required=True, type=Path, help="local-format JSONL to write")
    parser.add_argument("--category", default=None,
                        help="POPE only: category for lines without one (default: from the file name)")


def run_convert(args: argparse.Namespace) -> int:
    try:
        items = convert(args.task, args.src, category=args.category)
    except DataError as e:
        log.error("%s", e)
        return 2
    count = write_items(items, args.out)
    print(f"wrote {count} {args.task} items to {args.out}")
    return 0
