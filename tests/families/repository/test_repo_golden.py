"""The built-in repository suite on the real sandbox: a scripted policy replaying each task's
golden trajectory solves it, a do-nothing policy earns nothing, and so does the golden fix with
a test edited to pass."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.repository.repo_suite import KINDS
from flywheel.verifiers import get_verifier

from tests.families.conftest import concurrently

DOMAIN = get_domain("repo_bugs")
VERIFY = get_verifier("repo_tests")


def tasks(count, seed=0):
    return [DOMAIN.make_task("train", i, seed) for i in range(count)]


def test_the_suite_covers_every_kind_and_its_tasks_are_valid():
    drawn = tasks(40)
    assert {t["kind"] for t in drawn} == set(KINDS)
    assert all(DOMAIN.validate_task(t) == [] for t in drawn)
    distinct = {(t["prompt"], t["answer"], str(sorted(t["repo"]["files"].items()))) for t in drawn}
    assert len(distinct) >= 36 and all(t["split"] == "train" for t in drawn)


def one_of_every_kind(count=40, seed=3):
    """The first task of each kind among the first `count`: what docker replays (a container per
    call makes its episodes ~15x local's cost; the harness inside is the same)."""
    first = {}
    for task in tasks(count, seed):
        first.setdefault(task["kind"], task)
    assert set(first) == set(KINDS)
    return list(first.values())


def test_golden_trajectories_solve_and_doing_nothing_does_not(repo_sandbox, play, request):
    sandbox = repo_sandbox
    local = request.node.callspec.params["repo_sandbox"] == "local"

    def check(task):  # four episodes at a time, as a rollout runs them
        verdict, state, last = play(task, sandbox, task["golden"])
        assert (verdict.reward, verdict.verdict) == (1.0, "pass"), (task["task_id"], verdict)
        assert last.done == "submitted"
        assert DOMAIN.final_response(task, state) == task["answer"]  # the reference patch, exactly
        nothing = VERIFY(task, "", DOMAIN.run(sandbox, task, ""))
        assert nothing.reward == 0.0 and nothing.components["hidden_pass_rate"] == 0.0, task["task_id"]

    concurrently(check, tasks(14, seed=3) if local else one_of_every_kind())


def test_the_reference_patch_as_a_one_step_answer_solves(sandbox):
    for task in tasks(7, seed=5):
        verdict = VERIFY(task, task["answer"], DOMAIN.run(sandbox, task, task["answer"]))
        assert verdict.reward == 1.0, (task["task_id"], verdict)


@pytest.mark.parametrize("index", [0, 1])
def test_a_golden_fix_with_its_test_edited_earns_its_reward(sandbox, index, play):
    """As SWE-bench: the test file is put back before the checks run; the edit is flagged."""
    task = tasks(2, seed=9)[index]
    test_path = task["visible_tests"][0]
    text = task["repo"]["files"][test_path]
    edit = {"name": "write_file", "arguments": {"path": test_path, "content": text + "\n# reviewed\n"}}
    verdict, _, _ = play(task, sandbox, [*task["golden"][:-1], edit, task["golden"][-1]])
    assert verdict.reward == 1.0 and verdict.components["edited_tests"] == 1.0
    assert not verdict.exploit_suspected
