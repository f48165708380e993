"""Can these tests fail? Change one operator or number of a module at a time and run them against each change.

    python -m tests.mutation fastvlm/engine/plan.py tests/unit/engine/test_plan.py [more tests...]

Each mutant (`<` for `<=`, `and` for `or`, a dropped `not`, `+` for `-`, a number plus one, `True` for `False`)
is written into a copy of the project's files (those git tracks or would) in a temporary folder, never into the
working tree, and the given tests run there (`pytest -x`). A mutant they all pass is a *survivor*: a change of
meaning no test noticed, or an equivalent program (`x <= 255` against `x < 255` where both branches give the same
result). Lines of logging calls, decorators, class-level fields and default arguments are left alone: a documented
default is not what a test of the logic should pin. Prints each survivor as `path:line mutation: source` and a
JSON summary.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_SWAP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
         ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.Add: ast.Sub,
         ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv,
         ast.And: ast.Or, ast.Or: ast.And}
_LOG_CALLS = {"debug", "info", "warning", "error", "exception"}


@dataclass(frozen=True)
class Mutant:
    index: int  # of the node, in `_candidates` order
    line: int
    what: str  # "Lt -> LtE", "120 -> 121", "drop not"
    op: int = 0  # which operator of a chained comparison (`0 <= x < 1`)


def _left_alone(tree: ast.Module) -> set[int]:
    """Lines of logging calls, decorators, class-level fields and default arguments."""
    lines: set[int] = set()

    def span(node: ast.AST) -> None:
        lines.update(range(node.lineno, node.end_lineno + 1))

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _LOG_CALLS:
            span(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                span(decorator)
        if isinstance(node, ast.ClassDef):
            for field in node.body:
                if isinstance(field, (ast.AnnAssign, ast.Assign)):
                    span(field)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    span(default)
    return lines


def _candidates(tree: ast.Module) -> list[ast.AST]:
    skip = _left_alone(tree)
    return [n for n in ast.walk(tree) if getattr(n, "lineno", None) is not None and n.lineno not in skip]


def mutants(tree: ast.Module) -> Iterator[Mutant]:
    for i, node in enumerate(_candidates(tree)):
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                yield Mutant(i, node.lineno, f"{type(op).__name__} -> {_SWAP[type(op)].__name__}", k)
        elif isinstance(node, (ast.BoolOp, ast.BinOp)) and type(node.op) in _SWAP:
            yield Mutant(i, node.lineno, f"{type(node.op).__name__} -> {_SWAP[type(node.op)].__name__}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield Mutant(i, node.lineno, "drop not")
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            changed = not node.value if isinstance(node.value, bool) else node.value + 1
            yield Mutant(i, node.lineno, f"{node.value!r} -> {changed!r}")


def apply(tree: ast.Module, mutant: Mutant) -> str:
    """The module's source with `mutant` applied (to a copy of `tree`)."""
    tree = copy.deepcopy(tree)
    node = _candidates(tree)[mutant.index]
    if isinstance(node, ast.Compare):
        node.ops[mutant.op] = _SWAP[type(node.ops[mutant.op])]()
    elif isinstance(node, (ast.BoolOp, ast.BinOp)):
        node.op = _SWAP[type(node.op)]()
    elif isinstance(node, ast.UnaryOp):
        _replace(tree, node, node.operand)
    else:
        node.value = not node.value if isinstance(node.value, bool) else node.value + 1
    return ast.unparse(tree)


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
            elif isinstance(value, list):
                value[:] = [new if v is old else v for v in value]


def copy_project(root: Path, into: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout  # what git tracks or would: not .venv, models
    for name in filter(None, files.decode().split("\0")):
        source = root / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def pytest_command(tests: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]


def time_limit(command: list[str], cwd: Path, what: str) -> float:
    """Run the tests on the unmutated copy, which they must pass; how long a mutant's run may take."""
    started = time.perf_counter()
    if subprocess.run(command, cwd=cwd, capture_output=True).returncode != 0:
        raise SystemExit(f"the tests fail on {what} as it is: fix them first")
    return max(30.0, 4 * (time.perf_counter() - started))


def passes(command: list[str], cwd: Path, limit: float) -> bool:
    """Whether the tests pass. However the run ends, every process it left is killed: its own process group (a
    run past `limit`, or a test's subprocess a mutant kept from being stopped, e.g. deploy/launch.py's nginx) and
    anything still running from the copy in `cwd` in a session of its own (a replica of app.py): left alive they
    hold ports, memory and the CPU the next runs are timed on."""
    run = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        return run.wait(timeout=limit) == 0
    except subprocess.TimeoutExpired:
        return False  # a mutant that hangs the tests is caught by them
    finally:
        _kill_left(run, cwd)


def _kill_left(run: subprocess.Popen, copy_root: Path) -> None:
    try:
        os.killpg(run.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone: nothing was left in it
    run.wait()
    for pid in _running_from(copy_root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _running_from(root: Path) -> list[int]:
    """Processes whose command line names a file under `root` (not this one)."""
    mark, proc_dir = str(root.resolve()) + "/", Path("/proc")
    found = []
    for proc in proc_dir.iterdir() if proc_dir.is_dir() else ():  # Linux; elsewhere the group kill only
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if mark in cmdline:
            found.append(int(proc.name))
    return found


def probe(module: str, tests: list[str], root: Path = Path(".")) -> dict:
    """Run `tests` against every mutant of `module` (a path under `root`); the survivors and counts."""
    source = (root / module).read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    command = pytest_command(tests)
    with tempfile.TemporaryDirectory(prefix="mutation-") as tmp:
        copy_root = Path(tmp)
        copy_project(root, copy_root)
        target = copy_root / module
        target.write_text(ast.unparse(tree))  # the unmutated program as the mutants are written: must pass
        limit = time_limit(command, copy_root, module)
        survivors, count = [], 0
        for mutant in mutants(tree):
            target.write_text(apply(tree, mutant))
            count += 1
            if passes(command, copy_root, limit):
                text = lines[mutant.line - 1].strip()
                survivors.append({"line": mutant.line, "mutation": mutant.what, "source": text})
                print(f"{module}:{mutant.line} {mutant.what}: {text}", flush=True)
    return {"module": module, "mutants": count, "survived": len(survivors), "survivors": survivors}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="a source file, e.g. fastvlm/engine/plan.py")
    parser.add_argument("tests", nargs="+", help="the test files or node ids that should catch its mutants")
    args = parser.parse_args(argv)
    result = probe(args.module, args.tests)
    print(json.dumps({k: v for k, v in result.items() if k != "survivors"}))


if __name__ == "__main__":
    main()
