"""The doctor's report: checks in sections, printed as ✓/✗/!/– lines or written as JSON; failures decide the exit
code."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Status = Literal["ok", "fail", "warn", "skip", "info"]
MARKS = {"ok": "✓", "fail": "✗", "warn": "!", "skip": "–", "info": " "}


@dataclass(frozen=True)
class Check:
    """One line: a fact ("info") or a verdict, with what to do when it is not "ok"."""

    status: Status
    label: str
    detail: str = ""
    fix: str = ""


@dataclass
class Section:
    title: str
    checks: list[Check] = field(default_factory=list)

    def add(self, status: Status, label: str, detail: str = "", fix: str = "") -> Check:
        check = Check(status, label, detail, fix)
        self.checks.append(check)
        return check


def failures(sections: list[Section]) -> list[Check]:
    return [c for s in sections for c in s.checks if c.status == "fail"]


def exit_code(sections: list[Section]) -> int:
    """0 when nothing failed, else 1 (warnings and skips do not fail an install)."""
    return 1 if failures(sections) else 0


def render(sections: list[Section]) -> str:
    lines = []
    for s in sections:
        lines.append(f"\n{s.title}")
        shown = set()  # a fix said once per section
        for c in s.checks:
            lines.append(f"  {MARKS[c.status]} {c.label}" + (f": {c.detail}" if c.detail else ""))
            if c.fix and c.status in ("fail", "warn") and c.fix not in shown:
                lines.append(f"      fix: {c.fix}")
                shown.add(c.fix)
    failed = failures(sections)
    warned = sum(c.status == "warn" for s in sections for c in s.checks)
    verdict = f"{len(failed)} problem(s) found" if failed else "no problems found"
    lines.append(f"\n{verdict}" + (f", {warned} warning(s)" if warned else ""))
    return "\n".join(lines).lstrip("\n")


def to_json(sections: list[Section], facts: dict | None = None) -> dict:
    return {"ok": not failures(sections), "facts": facts or {},
            "sections": [{"title": s.title, "checks": [asdict(c) for c in s.checks]} for s in sections]}
