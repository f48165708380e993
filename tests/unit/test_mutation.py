"""The mutation probe (tests/mutation.py): which changes it makes, and that it finds a test that cannot fail."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

from tests.mutation import apply, mutants, passes, probe

SOURCE = '''
import logging
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    most: int = 64


def fits(n, most=10):
    log.info("checking %d", n > 3)
    return 0 <= n < most and not (n % 2)
'''


def test_each_operator_and_number_is_changed_but_not_logging_defaults_or_fields():
    found = [(m.line, m.what) for m in mutants(ast.parse(SOURCE))]
    assert found == [
        (13, "And -> Or"),
        (13, "LtE -> Lt"), (13, "Lt -> LtE"),  # each operator of the chained comparison
        (13, "drop not"),
        (13, "0 -> 1"),
        (13, "Mod -> FloorDiv"),
        (13, "2 -> 3"),
    ]  # fmt: skip


def test_a_mutant_changes_one_operator_of_a_chained_comparison():
    tree = ast.parse("ok = 0 <= n < most")
    lt_e, lt = [m for m in mutants(tree) if "->" in m.what and m.what[0] == "L"]
    assert apply(tree, lt_e) == "ok = 0 < n < most"
    assert apply(tree, lt) == "ok = 0 <= n <= most"
    assert apply(ast.parse("ok = not done"), next(mutants(ast.parse("ok = not done")))) == "ok = done"


def test_the_probe_names_the_changes_no_test_noticed_and_leaves_the_tree_alone(tmp_path):
    (tmp_path / "toy.py").write_text("def clamp(x):\n    return 10 if x > 10 else x\n")
    (tmp_path / "test_toy.py").write_text(
        "from toy import clamp\n\n\ndef test_clamp():\n    assert clamp(50) == 10 and clamp(1) == 1\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    before = (tmp_path / "toy.py").read_text()
    result = probe("toy.py", ["test_toy.py"], root=tmp_path)
    assert (tmp_path / "toy.py").read_text() == before
    assert result["mutants"] == 3  # `return 11 if ...` is caught
    assert [(s["line"], s["mutation"]) for s in result["survivors"]] == [
        (2, "Gt -> GtE"),  # equivalent: at x == 10 both give 10
        (2, "10 -> 11"),  # `x > 11`: clamp(11) gives 11, and no test asks near the limit
    ]


def test_each_javascript_mutant_still_changes_the_pages_scripts_once(tmp_path):
    """tests/mutation_js.py's edits are text: each must still find its text, once, in today's scripts."""
    from pathlib import Path

    import pytest

    from tests.mutation_js import LINK, MUTANTS, PAGE, mutate

    for name, edits in MUTANTS.items():
        for file in (LINK, PAGE):
            (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / file).write_text(Path(file).read_text())
        mutate(tmp_path, edits)
        assert any((tmp_path / f).read_text() != Path(f).read_text() for f in (LINK, PAGE)), name
    with pytest.raises(ValueError, match="not once"):
        mutate(tmp_path, [(LINK, "no such text in the script", "")])


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" not in status.read_text()


def test_a_run_past_its_limit_is_killed_with_the_processes_it_started(tmp_path):
    """A hung test's own subprocess (a bench run) must not outlive the mutant's run: it would hold the CPU."""
    marker = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time; "
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    assert not passes([sys.executable, "-c", script], tmp_path, limit=2.0)
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert passes([sys.executable, "-c", "pass"], tmp_path, limit=10.0)


def test_what_a_finished_run_leaves_behind_is_killed(tmp_path):
    """A mutant that breaks a test's clean-up (deploy/launch.py's stop) must not leave its nginx and replicas
    running: a child in the run's group, and one in a session of its own started from the copy's files."""
    (tmp_path / "replica.py").write_text("import time; time.sleep(60)\n")
    marker = tmp_path / "children.pid"
    script = ("import subprocess, sys; "
              "a = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
              f"b = subprocess.Popen([sys.executable, {str(tmp_path / 'replica.py')!r}], start_new_session=True); "
              f"open({str(marker)!r}, 'w').write(f'{{a.pid}} {{b.pid}}')")
    assert passes([sys.executable, "-c", script], tmp_path, limit=30.0)
    pids = [int(p) for p in marker.read_text().split()]
    deadline = time.monotonic() + 5
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, pids))
