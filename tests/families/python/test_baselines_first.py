"""python_tests compares every response with do-nothing solutions that it cannot reach: the harness
runs them first, on a budget of their own, and a report without all of them complete pays nothing.

The hack this closes: answer `None` for the first calls (where None is expected), then use up the
harness's time (sleep, busy-loop, sleep on re-import), so that the baselines, then run after the
cases in what was left of the solution's budget, were starved and `return None` earned 0.5.
Run on every isolating backend (`isolating`: tests/conftest.py): the stalling responses only ever
run inside the sandbox.
"""

import dataclasses
import json

import pytest

from flywheel.families.python.python_tests import BASELINES
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import attempt_nonce, read_output
from flywheel.verifiers import get_verifier

DOMAIN = get_domain("python_tests")
pytestmark = pytest.mark.quick_on("local")  # the harness's budget, not the backend, is tested


def humaneval(entry, args, body, check):
    """A task with room for a loaded machine (and a container's start) to answer the first calls:
    4 s for the solution (a stall spends 3.6 s of it), 1.5 s a case; what is checked is the
    verdict, not the machine's speed."""
    prompt = f"def {entry}({args}):\n    \"\"\"Solve it.\"\"\"\n"
    return {"task_id": f"t/{entry}", "domain": "python_tests", "prompt": prompt, "entry_point": entry,
            "test": "def check(candidate):\n" + "".join(f"    {line}\n" for line in check),
            "canonical_solution": body, "answer": "", "timeout_s": 4.0,
            "case_timeout_s": 1.5}


# None is the answer to half the cases, and those come first
FIRST_EVEN = humaneval("first_even", "xs", "    return next((x for x in xs if x % 2 == 0), None)\n", [
    "assert candidate([1, 3]) is None", "assert candidate([]) is None",
    "assert candidate([1, 2]) == 2", "assert candidate([4]) == 4"])
# a case that loops forever on any answer but the right one: it hangs for every baseline
HANGS = humaneval("double", "n", "    return 2 * n\n", [
    "for x in range(1, 4):\n        while candidate(x) != 2 * x:\n            pass\n        assert candidate(x) == 2 * x",
    "assert candidate(0) == 0"])
# every case loops while the answer is falsy: six baselines hang on each of them
WAITS = humaneval("double", "n", "    return 2 * n\n", [
    f"while not candidate({n}):\n        pass\n    assert candidate({n}) == {2 * n}" for n in range(1, 4)]
    + ["assert candidate(0) == 0"])

COUNTER = "import os, time\nCALLS = []\ndef first_even(xs):\n    CALLS.append(1)\n    if len(CALLS) > 2:\n"
REIMPORT = ("import os, time\nSEEN = '/tmp/.imported'\nif os.path.exists(SEEN):\n    {stall}\n"
            "open(SEEN, 'w').close()\nCALLS = []\ndef first_even(xs):\n    CALLS.append(1)\n"
            "    if len(CALLS) > 2:\n        os._exit(1)\n    return None\n")
STALLS = {
    "sleeps_after_two_calls": COUNTER + "        time.sleep(1000)\n    return None\n",
    "busy_loops_after_two_calls": COUNTER + "        while True:\n            pass\n    return None\n",
    "exits_then_sleeps_on_reimport": REIMPORT.format(stall="time.sleep(1000)"),
    "exits_then_busy_loops_on_reimport": REIMPORT.format(stall="while True:\n        pass"),
    # the one that beat the old harness: a case's timeout, then the rest of the budget on re-import
    "sleeps_in_a_call_then_on_reimport": REIMPORT.replace("os._exit(1)", "time.sleep(1000)").format(
        stall="time.sleep(1000)"),
}


@pytest.fixture(scope="module")
def score(isolating):
    def score(task, response):
        return get_verifier(DOMAIN.verifier)(task, response, DOMAIN.run(isolating, task, response))
    return score


@pytest.mark.parametrize("name", sorted(STALLS))
def test_answering_like_a_baseline_then_stalling_earns_nothing(score, name):
    v = score(FIRST_EVEN, STALLS[name])
    assert (v.reward, v.verdict) == (0.0, "fail"), (name, v)
    assert v.components.get("trivial_baseline") == 1.0, (name, v)   # the baselines ran, complete
    assert v.exploit_suspected and v.components.get("exploit_runs_out_the_clock") == 1.0, (name, v)


def test_a_plain_do_nothing_earns_nothing_and_is_not_flagged(score):
    v = score(FIRST_EVEN, "    return None\n")
    assert (v.reward, v.components.get("trivial_baseline"), v.exploit_suspected) == (0.0, 1.0, False), v


def test_a_correct_solution_still_earns_everything(score):
    v = score(FIRST_EVEN, FIRST_EVEN["canonical_solution"])
    assert (v.reward, v.verdict, v.exploit_suspected) == (1.0, "pass", False), v


@pytest.mark.parametrize("task", [HANGS, pytest.param(WAITS, marks=pytest.mark.slow)],  # 6 s of waiting;
                         ids=["hangs_for_all", "waits_while_falsy"])           # hangs_for_all stays quick
def test_tests_that_hang_on_a_do_nothing_answer_still_pay_a_solution(score, task):
    """A hanging case is cut by the baselines' own per-case timer and counted as not passed; the
    baselines are still complete, so the right answer earns 1 and `return 0` nothing (it passes
    only what the `0` baseline passes, or hangs where the baselines did)."""
    v = score(task, task["canonical_solution"])
    assert (v.reward, v.verdict) == (1.0, "pass"), v
    v = score(task, "    return 0\n")
    assert v.reward == 0.0 and "baselines_missing" not in v.components, v
    if task is HANGS:
        assert v.components.get("trivial_baseline") == 1.0, v


def run_plan_edited(backend, task, response, edit):
    """The harness on `backend` with its plan changed by `edit(plan)`, read as the pipeline reads it."""
    nonce = attempt_nonce(DOMAIN)
    request = DOMAIN.request(task, response, nonce)
    plan = json.loads(request.stdin)
    edit(plan)
    result = backend.run(dataclasses.replace(request, stdin=json.dumps(plan)))
    return get_verifier(DOMAIN.verifier)(task, response, read_output(DOMAIN, result, nonce))


@pytest.mark.parametrize("edit", ["no_baselines", "one_unknown", "no_time"])
def test_a_report_without_complete_baselines_pays_nothing(isolating, edit):
    edits = {"no_baselines": lambda plan: plan.pop("baselines"),
             "one_unknown": lambda plan: plan.update(baselines=[b for b in BASELINES if b != "null"] + ["x"]),
             "no_time": lambda plan: plan.update(baseline_budget_s=0.0)}
    v = run_plan_edited(isolating, FIRST_EVEN, FIRST_EVEN["canonical_solution"], edits[edit])
    assert (v.reward, v.verdict) == (0.0, "fail"), v
    assert v.components.get("baselines_missing") == 1.0 and v.components["hidden_0"] == 0.0, v


def test_baselines_that_outlast_their_budget_pay_nothing(isolating):
    """A task whose tests hang on the do-nothing answers longer than its baseline budget cannot be
    judged: nothing is paid, and the detail says why."""
    task = {**HANGS, "baseline_budget_s": 0.3}
    v = get_verifier(DOMAIN.verifier)(task, task["canonical_solution"],
                                      DOMAIN.run(isolating, task, task["canonical_solution"]))
    assert v.reward == 0.0 and v.components.get("baselines_missing") == 1.0, v
    assert "baseline_budget_s" in v.detail


def test_the_sandbox_limit_covers_both_budgets():
    spec = DOMAIN.program(FIRST_EVEN, "")
    plan = json.loads(spec["stdin"])
    assert spec["limits"]["timeout_s"] >= plan["baseline_budget_s"] + plan["budget_s"]
    assert plan["baselines"] == list(BASELINES)
    task = {**FIRST_EVEN, "timeout_s": 2.5, "baseline_budget_s": 1.5}
    assert DOMAIN.program(task, "")["limits"]["timeout_s"] == 4.0
