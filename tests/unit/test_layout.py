"""The layout's rules, read from the imports (every import, lazy and TYPE_CHECKING ones included):
no circle; fastvlm/ never imports app.py, and ui/ only from the browser bench (it serves the whole app);
the engine imports no other fastvlm package; the converter never imports the random models or the checks;
every package says what it is; modules and functions stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 320  # "about 300"
MAX_FUNCTION_LINES = 50  # signature, docstring and body
UI_ALLOWED_IN = ("fastvlm.bench.browser",)  # the browser bench measures the whole app, so it builds it with ui


def module_files() -> dict[str, Path]:
    files = sorted([*ROOT.glob("fastvlm/**/*.py"), *ROOT.glob("ui/**/*.py"), ROOT / "app.py"])
    out = {}
    for path in files:
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports anywhere in its file."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            for a in node.names:  # `from pkg import module` imports the module
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in found if m in known and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_rules_see_a_circle_and_a_forbidden_arrow():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert "fastvlm.engine.events" in imports_of("fastvlm.weights.hub", ROOT / "fastvlm/weights/hub.py",
                                                  set(module_files()))


def test_no_import_circle(graph):
    assert find_cycle(graph) is None


def test_the_library_never_imports_the_entry_script_and_only_the_browser_bench_imports_ui(graph):
    bad = sorted((m, d) for m, deps in graph.items() if m.startswith("fastvlm") for d in deps
                 if d == "app" or (d.split(".")[0] == "ui" and not m.startswith(UI_ALLOWED_IN)))
    assert bad == []


def test_the_engine_imports_no_other_fastvlm_package(graph):
    bad = sorted((m, d) for m, deps in graph.items() if m.startswith("fastvlm.engine") for d in deps
                 if not d.startswith("fastvlm.engine"))
    assert bad == []


def test_the_converter_never_imports_the_random_models_or_the_checks(graph):
    bad = sorted((m, d) for m, deps in graph.items() if m.startswith("fastvlm.convert") for d in deps
                 if d.startswith(("fastvlm.synth", "fastvlm.verify", "fastvlm.bench")))
    assert bad == []


def test_every_package_says_what_it_is_and_modules_stay_small():
    files = module_files()
    silent = [n for n, p in files.items()
              if p.name == "__init__.py" and not ast.get_docstring(ast.parse(p.read_text()))]
    long = [(n, lines) for n, p in files.items() if (lines := len(p.read_text().splitlines())) > MAX_LINES]
    assert silent == [] and long == []


def long_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than MAX_FUNCTION_LINES."""
    return [(n.name, lines) for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (lines := n.end_lineno - n.lineno + 1) > MAX_FUNCTION_LINES]


def test_functions_stay_small():
    def body(indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))

    assert long_functions(f"def f():\n{body('    ')}") == [("f", MAX_FUNCTION_LINES + 1)]  # the rule sees them
    assert long_functions(f"class C:\n    async def g(self):\n{body(' ' * 8)}") == [("g", MAX_FUNCTION_LINES + 1)]
    long = [(n, f, lines) for n, p in module_files().items() for f, lines in long_functions(p.read_text())]
    assert long == []
