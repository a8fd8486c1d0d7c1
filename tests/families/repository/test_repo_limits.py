"""A repository task's own sandbox limits: a real repository's tests need more time than the built-in
suite's 10 s. The task's `limits` reach every call's request (tools and scoring) and the harness's
budget; bad ones are refused by validate_task; a big snapshot gets a work dir that holds it."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.domains.tools import ToolCall, render_call
from flywheel.domains.tool_runner import ToolRunner
from flywheel.families.repository.unified_diff import make_diff
from flywheel.verifiers import get_verifier

DOMAIN = get_domain("repo")
OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
SLOW = "import time\n\n\ndef settle():\n    time.sleep(5)\n    return True\n"
FIXED = OPS.replace("s -= x", "s += x")


def task(**fields):
    return DOMAIN.normalize_task({
        "task_id": "calc-slow", "domain": "repo", "prompt": "total() of a list is wrong",
        "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": OPS, "calc/slow.py": SLOW}},
        "hidden_tests": [{"id": "h1", "module": "calc.ops", "call": "total([5, 6, 7])", "expect": 18},
                         {"id": "h2", "module": "calc.slow", "call": "settle()", "expect": True}],
        **fields})


def test_the_tasks_limits_reach_every_request_and_the_harness_budget():
    slow = task(limits={"timeout_s": 40, "memory_mb": 2048, "processes": 64})
    assert DOMAIN.validate_task(slow) == []
    call = DOMAIN.tool_request(slow, DOMAIN.start_state(slow), ToolCall("run_shell", {"command": "true"}))
    scored = DOMAIN.request(slow, "")
    for request in (call, scored):
        assert (request.limits.timeout_s, request.limits.memory_mb, request.limits.processes) == (40, 2048, 64)
    assert '"budget_s": 38.0' in call.stdin and '"budget_s": 38.5' in scored.stdin
    plain = DOMAIN.request(task(), "")
    assert (plain.limits.timeout_s, plain.limits.memory_mb, plain.limits.disk_mb) == (10.0, 1024, 64)


def test_a_big_snapshot_gets_a_work_dir_that_holds_it():
    big = task()
    big["repo"] = {"files": {**big["repo"]["files"], "data/blob.txt": "x" * (100 << 20)}}
    assert DOMAIN.request(big, "").limits.disk_mb >= 264  # twice 100 MB, and room besides


@pytest.mark.parametrize("limits, says", [
    ({"timeout_s": 0}, "limits.timeout_s"), ({"timeout_s": 1e9}, "limits.timeout_s"),
    ({"memory_mb": "lots"}, "limits.memory_mb"), ({"network": True}, "unknown key 'network'"),
    ([30], "must be an object")])
def test_bad_limits_are_refused_saying_which(limits, says):
    problems = DOMAIN.validate_task(task(limits=limits))
    assert any(says in p for p in problems), problems
    assert DOMAIN.request(task(limits=limits), "").limits.timeout_s == 10.0  # never used


@pytest.mark.slow  # a check that takes 5 s, twice
def test_a_slow_check_passes_within_the_tasks_time_and_not_a_shorter_one(sandbox):
    diff = make_diff(task()["repo"]["files"], {"calc/ops.py": FIXED})
    verify = get_verifier("repo_tests")
    slow, short = task(limits={"timeout_s": 20}), task(limits={"timeout_s": 4})
    assert verify(slow, diff, DOMAIN.run(sandbox, slow, diff)).reward == 1.0
    assert verify(short, diff, DOMAIN.run(sandbox, short, diff)).reward == 0.0  # out of time at 4 s
    shell = DOMAIN.step(slow, DOMAIN.start_state(slow), render_call(ToolCall(
        "run_shell", {"command": "sleep 5 && echo woke"})), ToolRunner(sandbox))
    assert "woke" in shell.observation and "[exit 0]" in shell.observation
