"""Limits that fit and blame that holds: the default timeout grows with a task's checks (543
PASS_TO_PASS tests do not fit 10 s), a row's own `limits` win, a reference that does not finish
is told as the task's limits in one line (never one problem per check), `flywheel tasks
validate` gives the same report for the same file, and a row with no environment is told how
to give it one."""

import json

import pytest

from flywheel.cli import main as cli_main
from flywheel.domains.registry import get_domain
from flywheel.families.repository.unified_diff import make_diff

DOMAIN = get_domain("repo")
OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS}


def row(**extra):
    return {"task_id": "calc", "domain": "repo", "prompt": "total() subtracts.", "repo": {"files": FILES},
            "hidden_tests": [{"id": "h", "module": "calc.ops", "call": "total([5, 6])", "expect": 11}], **extra}


def test_the_default_timeout_grows_with_the_checks_and_a_rows_limits_win():
    many = [{"id": f"tests/t.py::test_{n}", "pytest": f"tests/t.py::test_{n}"} for n in range(543)]
    timeouts = [DOMAIN.limits_of(DOMAIN.normalize_task(r))["timeout_s"] for r in [
        row(), row(regression_tests=many), row(regression_tests=many, limits={"timeout_s": 30})]]
    assert timeouts[0] < 11 and timeouts[1] > 100 and timeouts[2] == 30


@pytest.mark.slow
def test_a_reference_that_does_not_finish_is_the_tasks_limits_in_one_line(sandbox):
    from flywheel.families.repository.task_checks import repo_problems
    slow = OPS.replace("    s = 0\n", "    import time\n    time.sleep(60)\n    s = 0\n").replace("-=", "+=")
    regression = [{"id": f"r{n}", "module": "calc.ops", "call": "1", "expect": 1} for n in range(40)]
    task = DOMAIN.normalize_task(row(reference_patch=make_diff(FILES, {"calc/ops.py": slow}),
                                     regression_tests=regression, limits={"timeout_s": 4}))
    assert repo_problems(task, sandbox) == [
        "the reference does not finish in 4 s; set limits.timeout_s (for example 8)"]


@pytest.mark.slow
def test_validate_gives_the_same_report_twice(environments, calc_row, tmp_path, capsys):
    path = tmp_path / "tasks.jsonl"
    rows = [calc_row(task_id="good"),
            calc_row(task_id="already-passes", hidden_tests=[{"id": "e", "pytest": "tests/test_x.py::test_empty"}],
                     regression_tests=[])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reports = []
    for _ in range(2):
        assert cli_main.main(["tasks", "validate", str(path), "--format", "json"]) == 1
        reports.append(capsys.readouterr().out)
    assert reports[0] == reports[1] and json.loads(reports[0])["problems"] == [
        f"{path}: line 2: task already-passes: the snapshot passes hidden check 'e'"]


def test_a_row_without_an_environment_is_told_how_to_give_it_one(sandbox):
    from flywheel.families.repository.task_checks import no_pytest
    said = no_pytest(DOMAIN, DOMAIN.normalize_task(row()), sandbox)
    assert "names no environment" in said and "--environment NAME" in said
    said = no_pytest(DOMAIN, DOMAIN.normalize_task(row(environment="bare")), sandbox)
    assert "environment 'bare' has no pytest" in said
