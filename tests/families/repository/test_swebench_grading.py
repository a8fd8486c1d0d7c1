"""Our pytest grading against SWE-bench's own (the `swebench` extra, 5.0.2): one real scoring run
in the local sandbox (a pytest environment, tests/families/conftest.py) over a test module with
every outcome (pass, fail, skip, xfail, xpass, strict xpass, setup and teardown errors, ids with
blanks, truncated parametrized ids whose outcomes agree or not, missing tests and files); each id
is a FAIL_TO_PASS and a PASS_TO_PASS check at once. The log our harness makes of its signed
record is graded by swebench.harness.grading (get_logs_eval, get_eval_tests_report,
get_resolution_status): the same verdict on every check. The same tests run as plain
`pytest -rA --no-fold-skipped` (as SWE-bench's eval script runs them) parse to the same statuses.
Skips with the reason where swebench is not installed."""

import json

import pytest

from flywheel.domains.registry import get_domain
from flywheel.domains.report_channel import harness_report
from flywheel.domains.tools import ToolCall
from flywheel.families.repository.repo import REPORT_MARKER
from flywheel.families.repository.unified_diff import make_diff
from flywheel.verifiers import get_verifier

grading = pytest.importorskip("swebench.harness.grading", reason="the `swebench` extra is not installed "
                              "(pip install -e '.[swebench]')")
from swebench.harness.constants import FAIL_TO_PASS, PASS_TO_PASS, ResolvedStatus  # noqa: E402
from swebench.harness.log_parsers.python import parse_log_pytest  # noqa: E402
from swebench.types import TestSpec as Spec  # noqa: E402  (not collected as a test class)

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS}
CASES = '''import pytest
from calc.ops import total


def test_pass():
    assert total([1, 2]) == 3


def test_fail():
    assert total([1, 2]) == 4


def test_skip():
    pytest.skip("not here")


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert total([1]) == 2


@pytest.mark.xfail(reason="fixed since")
def test_xpass():
    assert total([1]) == 1


@pytest.mark.xfail(strict=True)
def test_xpass_strict():
    assert total([1]) == 1


@pytest.fixture
def broken():
    raise RuntimeError("setup")


@pytest.fixture
def dirty():
    yield
    raise RuntimeError("teardown")


def test_setup_error(broken):
    pass


def test_teardown_error(dirty):
    assert True


def test_fail_and_teardown_error(dirty):
    assert False


@pytest.mark.parametrize("xs", [[1], [2]], ids=["a b-1", "a b-2"])
def test_spaced(xs):
    assert total(xs) == xs[0]


@pytest.mark.parametrize("n", [1, 2], ids=["ok-1", "ok-2"])
def test_allpass(n):
    assert n


@pytest.mark.parametrize("n", [1, 2], ids=["p-1", "f-2"])
def test_mixed(n):
    assert n == 1


@pytest.mark.parametrize("n", [1, 2], ids=["p-1", "s-2"])
def test_passskip(n):
    if n == 2:
        pytest.skip("two")


@pytest.mark.parametrize("n", [1, 2], ids=["s-1", "f-2"])
def test_skipfail(n):
    if n == 1:
        pytest.skip("one")
    assert False
'''
M = "tests/test_cases.py::"
IDS = [M + name for name in (
    "test_pass", "test_fail", "test_skip", "test_xfail", "test_xpass", "test_xpass_strict", "test_setup_error",
    "test_teardown_error", "test_fail_and_teardown_error", "test_spaced[a", "test_allpass[ok", "test_allpass[ok-1]",
    "test_mixed[", "test_passskip[", "test_skipfail[", "test_missing")] + ["tests/test_gone.py::test_x"]
FIXED = OPS.replace("s -= x", "s += x")


def spec(f2p, p2p):
    return Spec(instance_id="calc-1", image="", eval_script_list=[], repo="calc/calc", version="0",
                    FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p, log_parser="parse_log_pytest", eval_type="pass_and_fail")


def swebench_success(log_path, node, group):
    """Whether swebench grades `node` a success as a FAIL_TO_PASS or a PASS_TO_PASS test."""
    f2p, p2p = ([node], []) if group == FAIL_TO_PASS else ([], [node])
    status_map, found = grading.get_logs_eval(spec(f2p, p2p), str(log_path))
    assert found
    report = grading.get_eval_tests_report(status_map, {FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p})
    return node in report[group]["success"]


@pytest.fixture
def with_test_log(monkeypatch):
    """The repo domain asking its harness for the SWE-bench log of the run (plan `test_log`)."""
    domain = get_domain("repo")
    program = domain.program

    def logged(task, response, **report):
        made = program(task, response, **report)
        return {**made, "stdin": json.dumps({**json.loads(made["stdin"]), "test_log": True})}
    monkeypatch.setattr(domain, "program", logged)
    return domain


def test_our_verdicts_are_swebenchs_on_the_same_log(sandbox, environments, with_test_log, tmp_path):
    domain = with_test_log
    task = domain.normalize_task({
        "task_id": "calc-1", "domain": "repo", "prompt": "total() subtracts.", "repo": {"files": FILES},
        "environment": "pytest-env", "test_patch": make_diff({}, {"tests/test_cases.py": CASES}),
        "hidden_tests": [{"id": f"F2P {node}", "pytest": node} for node in IDS],
        "regression_tests": [{"id": f"P2P {node}", "pytest": node} for node in IDS]})
    response = make_diff(FILES, {"calc/ops.py": FIXED})
    execution = domain.run(sandbox, task, response)
    report, problem, _ = harness_report(execution, REPORT_MARKER)
    assert report is not None, problem
    assert report["applier"] in ("git apply", "flywheel"), report["applier"]
    log = tmp_path / "test_output.txt"
    log.write_text(report["test_log"])
    ours = {cid: outcome["ok"] for cid, outcome in report["checks"].items()}
    theirs = {f"{tag} {node}": swebench_success(log, node, group)
              for node in IDS for tag, group in (("F2P", FAIL_TO_PASS), ("P2P", PASS_TO_PASS))}
    assert ours == theirs, {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]}
    # what SWE-bench's rules give on this log, spelled out: the cases this test exists for
    assert {n[len(M):] for n in IDS if ours[f"F2P {n}"]} == {"test_pass", "test_xfail", "test_spaced[a",
                                                            "test_allpass[ok", "test_allpass[ok-1]"}
    assert {n[len(M):] for n in IDS if ours[f"P2P {n}"] and not ours[f"F2P {n}"]} == {"test_skip", "test_skipfail["}
    verdict = get_verifier("repo_tests")(task, response, execution)
    status_map, _ = grading.get_logs_eval(spec(IDS, IDS), str(log))
    whole = grading.get_eval_tests_report(status_map, {FAIL_TO_PASS: IDS, PASS_TO_PASS: IDS})
    assert (verdict.reward, grading.get_resolution_status(whole)) == (0.0, ResolvedStatus.NO.value)
    passing = [n for n in IDS if ours[f"F2P {n}"]]
    held = [n for n in IDS if ours[f"P2P {n}"]]
    subset = grading.get_eval_tests_report(status_map, {FAIL_TO_PASS: passing, PASS_TO_PASS: held})
    assert grading.get_resolution_status(subset) == ResolvedStatus.FULL.value

    # the same tests as SWE-bench's eval script runs them: plain pytest -rA, parsed by swebench
    runner = "python -m pytest -rA --no-fold-skipped -p no:cacheprovider --tb=no -q tests/test_cases.py"
    state = {"changes": {"calc/ops.py": FIXED, "tests/test_cases.py": CASES}, "log": []}
    call = ToolCall("run_shell", {"command": runner})
    step = domain.observe(task, state, call, sandbox.run(domain.tool_request(task, state, call)))
    assert "short test summary info" in step.observation, step.observation[-2000:]
    plain = parse_log_pytest(step.observation, spec([], []))
    assert plain == status_map, {k: (plain.get(k), status_map.get(k)) for k in {*plain, *status_map}
                                 if plain.get(k) != status_map.get(k)}
