"""The terminal suite (repo_terminal) on the real sandbox: each kind's golden trajectory solves
its task, doing nothing earns nothing, a hand-written output earns nothing, and the offline pip
install the install_wheel docstring promises really works."""

import json
import re

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.repository.repo_terminal import KINDS
from flywheel.verifiers import get_verifier

from tests.families.conftest import concurrently

DOMAIN = get_domain("repo_terminal")
VERIFY = get_verifier("repo_tests")
EDITS = ("write_file", "edit_file", "run_shell")


def tasks(count, seed=0):
    return [DOMAIN.make_task("train", i, seed) for i in range(count)]


def of_kind(kind, count, seed=3):
    chosen = [t for t in tasks(40, seed) if t["kind"] == kind][:count]
    assert len(chosen) == count
    return chosen


def test_the_suite_draws_every_kind_distinct_valid_tasks():
    drawn = tasks(200)
    assert {t["kind"] for t in drawn} == set(KINDS)
    assert all(DOMAIN.validate_task(t) == [] for t in drawn)
    distinct = {json.dumps([t["prompt"], t["answer"], t["repo"]], sort_keys=True) for t in drawn}
    assert len(distinct) >= 150
    assert all(json.loads(json.dumps(t)) == t for t in drawn)  # the task JSON round trip
    assert all(c["name"] in {"read_file", "list_files", "search", *EDITS, "run_visible_tests", "submit_changes"}
               for t in drawn for c in t["golden"])


@pytest.mark.parametrize("kind", KINDS)
def test_golden_trajectories_solve_and_doing_nothing_does_not(repo_sandbox, kind, play, request):
    sandbox = repo_sandbox  # local, and docker where it runs
    # three tasks of the kind on local, one on docker (a container per call: ~15x local's cost)
    count = 3 if request.node.callspec.params["repo_sandbox"] == "local" else 1

    def check(task):
        verdict, state, last = play(task, sandbox, task["golden"])
        assert (verdict.reward, verdict.verdict) == (1.0, "pass"), (task["task_id"], verdict)
        assert last.done == "submitted"
        assert DOMAIN.final_response(task, state) == task["answer"]  # the golden's edits: fixed_files
        nothing = VERIFY(task, "", DOMAIN.run(sandbox, task, ""))
        assert nothing.reward == 0.0 and nothing.components["hidden_pass_rate"] == 0.0, task["task_id"]

    concurrently(check, of_kind(kind, count))


def test_a_hand_written_output_file_earns_nothing(sandbox, play):
    for task in of_kind("transform_files", 2, seed=5):
        output = next(c["arguments"]["command"].split("cat ")[-1] for c in task["golden"]
                      if c["name"] == "run_shell")
        expected = task["hidden_tests"][0]["expect"][1]
        calls = [{"name": "write_file", "arguments": {"path": output, "content": expected}},
                 {"name": "submit_changes", "arguments": {}}]
        verdict, _, _ = play(task, sandbox, calls)
        assert verdict.reward == 0.0 and verdict.components["hidden_pass_rate"] == 0.0, task["task_id"]


@pytest.mark.slow  # a real pip build, twice
def test_install_wheel_by_an_offline_pip_install_solves(sandbox, play):
    for task in of_kind("install_wheel", 2, seed=7):
        pkg = task["package"]
        target = next(c["arguments"]["path"] for c in task["golden"] if c["name"] == "write_file").split("/")[0]
        pip = (f"python3 -m pip install --no-index --no-build-isolation --target {target} "
               f"vendor/{pkg} 2>&1 | tail -2")
        calls = [{"name": "run_shell", "arguments": {"command": pip}},
                 {"name": "run_visible_tests", "arguments": {}}, {"name": "submit_changes", "arguments": {}}]
        verdict, state, _ = play(task, sandbox, calls)
        assert verdict.reward == 1.0, (task["task_id"], verdict)
        assert any(p.startswith(f"{target}/{pkg}-") and p.endswith("dist-info/RECORD") for p in state["changes"])


def variant(task):
    """Which template, defect, package layout or spec `task` draws: names and numbers left out."""
    answer = task["answer"]
    if task["kind"] == "repair_script":
        removed = next(line for line in answer.splitlines() if line.startswith("-") and not line.startswith("---"))
        return task["kind"], re.sub(r'"[^"]*"|\d+', "", removed).strip()
    if task["kind"] == "install_wheel":
        return task["kind"], any("/src/" in p for p in task["repo"]["files"]), "summarize" in answer
    return task["kind"], "people.tsv" in answer, [f for f in ("sum(groups", "len(groups", "max(groups") if f in answer]


@pytest.mark.slow  # one task of every variant, scored twice
def test_reference_patches_solve_and_the_snapshots_fail_across_variants(sandbox):
    """One-step scoring only (cheap), one task per variant: 9 script defects, 2 packages x 2
    layouts, 4 transform specs; the generator's mirrors agree with the generated code."""
    chosen = {}
    for task in tasks(200, seed=11):
        chosen.setdefault(repr(variant(task)), task)
    assert len(chosen) == 17, sorted(chosen)
    for task in chosen.values():
        verdict = VERIFY(task, task["answer"], DOMAIN.run(sandbox, task, task["answer"]))
        assert verdict.reward == 1.0, (task["task_id"], verdict)
        nothing = VERIFY(task, "", DOMAIN.run(sandbox, task, ""))
        assert nothing.components["hidden_pass_rate"] == 0.0, task["task_id"]
