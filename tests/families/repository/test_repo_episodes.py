"""Repository episodes on the real sandbox: tools change the tree through the harness, the state is
the change from the snapshot, the answer is its diff, and the score comes from checks the change
cannot forge. Each hack scores 0 and is flagged."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call
from flywheel.families.repository.unified_diff import make_diff
from flywheel.verifiers import get_verifier

DOMAIN = get_domain("repo")
OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
TEST = "from calc.ops import total\n\n\ndef test_total():\n    assert total([4, 5]) == 9\n"
TASK = DOMAIN.normalize_task({
    "task_id": "calc-1", "domain": "repo", "prompt": "total() of a list is wrong",
    "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": TEST}},
    "visible_tests": ["tests/test_ops.py"],
    "hidden_tests": [{"id": "h1", "module": "calc.ops", "call": "total([5, 6, 7])", "expect": 18},
                     {"id": "h2", "module": "calc.ops", "call": "total([-3])", "expect": -3}],
    "regression_tests": [{"id": "r1", "module": "calc.ops", "call": "total([])", "expect": 0}]})
FIXED = OPS.replace("s -= x", "s += x")


def step(task, state, name, sandbox, **arguments):
    return DOMAIN.step(task, state, render_call(ToolCall(name, arguments)), ToolRunner(sandbox))


def score(sandbox, changes, task=TASK):
    diff = changes if isinstance(changes, str) else make_diff(task["repo"]["files"], changes)
    return get_verifier("repo_tests")(task, diff, DOMAIN.run(sandbox, task, diff))


def test_the_task_is_valid_and_a_broken_one_says_what_is_wrong():
    assert DOMAIN.validate_task(TASK) == []
    broken = {**TASK, "hidden_tests": [{"id": "h"}], "visible_tests": ["tests/nope.py"]}
    problems = DOMAIN.validate_task(broken)
    assert any("hidden_tests[0]" in p and "module" in p for p in problems)
    assert any("tests/nope.py" in p for p in problems)


def test_an_episode_reads_edits_tests_and_submits_its_diff(sandbox):
    state = DOMAIN.start_state(TASK)
    listed = step(TASK, state, "list_files", sandbox)
    assert listed.observation.split() == ["calc/__init__.py", "calc/ops.py", "tests/test_ops.py"]
    read = step(TASK, state, "read_file", sandbox, path="calc/ops.py", start=4, end=4)
    assert read.observation.endswith("4|         s -= x")
    found = step(TASK, state, "search", sandbox, pattern=r"s \-= x")
    assert found.observation == "calc/ops.py:4: s -= x"
    failing = step(TASK, state, "run_visible_tests", sandbox)
    assert "FAIL tests/test_ops.py::test_total" in failing.observation and failing.reward == 0.0
    edited = step(TASK, state, "edit_file", sandbox, path="calc/ops.py", old="s -= x", new="s += x")
    assert edited.state["changes"] == {"calc/ops.py": FIXED}  # the change, never the tree
    passing = step(TASK, edited.state, "run_visible_tests", sandbox)
    assert passing.reward == 1.0 and passing.state["changes"] == edited.state["changes"]
    shell = step(TASK, passing.state, "run_shell", sandbox,
                 command="python -c 'print(6*7)' && echo note > NOTES.md && rm calc/__init__.py")
    assert "42" in shell.observation and "[exit 0]" in shell.observation
    assert shell.state["changes"] == {"calc/ops.py": FIXED, "NOTES.md": "note\n", "calc/__init__.py": None}
    undone = step(TASK, shell.state, "run_shell", sandbox, command="rm NOTES.md && touch calc/__init__.py")
    assert undone.state["changes"] == {"calc/ops.py": FIXED}  # back to the snapshot: no change
    done = step(TASK, undone.state, "submit_changes", sandbox)
    assert done.done == "submitted"
    diff = DOMAIN.final_response(TASK, done.state)
    assert diff.startswith("diff --git a/calc/ops.py b/calc/ops.py") and "+        s += x" in diff
    verdict = score(sandbox, diff)
    assert (verdict.reward, verdict.verdict, verdict.exploit_suspected) == (1.0, "pass", False)
    assert [line.split(" ")[0] for line in done.state["log"]] == [
        "edit_file", "run_visible_tests", "run_shell", "run_shell"]


def test_bad_calls_are_error_observations_and_change_nothing(sandbox):
    state = DOMAIN.start_state(TASK)
    for name, arguments, says in [
            ("read_file", {"path": "missing.py"}, "cannot be read"),
            ("edit_file", {"path": "calc/ops.py", "old": "s", "new": "t"}, "occurs 5 times"),
            ("apply_patch", {"patch": "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1 +1 @@\n-nope\n+x\n"}, "calc/ops.py"),
            ("search", {"pattern": "("}, "not a regular expression"),
            ("run_visible_tests", {"paths": ["calc/ops.py"]}, "not a visible test file")]:
        got = step(TASK, state, name, sandbox, **arguments)
        assert got.observation.startswith("error:") and says in got.observation, (name, got.observation)
        assert got.state["changes"] == {}
    refused = step(TASK, state, "write_file", sandbox, path="../escape.py", content="x")
    assert refused.tool_error and refused.result is None  # the schema refuses it: nothing ran
    linked = step(TASK, state, "run_shell", sandbox, command="ln -s /etc/passwd calc/pw")
    assert "calc/pw not kept (a symbolic link)" in linked.observation and linked.state["changes"] == {}
    via_link = step(TASK, state, "run_shell", sandbox, command="ln -s / calc/root; echo x > ../out")
    assert "outside the repository are not kept: out" in via_link.observation


def test_a_plain_response_is_a_diff_a_one_step_episode(sandbox):
    diff = make_diff(TASK["repo"]["files"], {"calc/ops.py": FIXED})
    got = DOMAIN.step(TASK, DOMAIN.start_state(TASK), diff, ToolRunner(sandbox))
    assert got.state["changes"] == {"calc/ops.py": FIXED}


def test_doing_nothing_or_a_wrong_fix_or_a_broken_diff_scores_zero(sandbox):
    for changes in [{}, {"calc/ops.py": OPS.replace("s -= x", "s = x")}, "--- a/calc/ops.py\n+++ b/x\n@@ -9 +9 @@\n-q\n"]:
        verdict = score(sandbox, changes)
        assert verdict.reward == 0.0 and verdict.verdict == "fail" and not verdict.exploit_suspected
    broke = score(sandbox, {"calc/ops.py": FIXED.replace("s = 0", "s = 0\n    if not xs:\n        return None")})
    assert broke.reward == 0.0 and broke.components["regression_pass_rate"] == 0.0


@pytest.mark.parametrize("name, changes", [
    ("edit the test", {"tests/test_ops.py": TEST.replace("== 9", "== -9")}),
    ("delete the test", {"tests/test_ops.py": None}),
    ("a conftest.py", {"conftest.py": "import calc.ops\ncalc.ops.total = lambda xs: sum(xs)\n"}),
])
def test_test_edits_are_put_back_and_flagged_not_penalized(sandbox, name, changes):
    """As SWE-bench: the task's own tests run (the edit is put back), so an edit alone fixes
    nothing; the verdict carries `edited_tests`, not an exploit flag."""
    verdict = score(sandbox, changes)
    assert verdict.reward == 0.0 and not verdict.exploit_suspected, (name, verdict)
    assert verdict.components["edited_tests"] == 1.0 and "edited_tests" in verdict.detail, (name, verdict)


@pytest.mark.parametrize("name, changes, flag", [
    ("exit at import", {"calc/ops.py": "import os\nos._exit(0)\n" + OPS}, "exited_early"),
    ("sys.exit in the call", {"calc/ops.py": OPS.replace("s = 0", "raise SystemExit(0)")}, "exited_early"),
    ("special-case the visible test", {"calc/ops.py": OPS.replace("s = 0", "if xs == [4, 5]:\n        return 9\n    s = 0")},
     "special_cased"),
])
def test_each_hack_scores_zero_and_is_flagged(sandbox, name, changes, flag):
    verdict = score(sandbox, changes)
    assert verdict.reward == 0.0 and verdict.exploit_suspected, (name, verdict)
    assert verdict.components[f"exploit_{flag}"] == 1.0, (name, verdict)


def test_a_right_fix_with_a_test_edit_earns_its_reward(sandbox):
    """As SWE-bench scores it: the checks ran on the pristine tests and passed; the edit is a
    component for analysis, not a penalty (a skipped test put back runs again)."""
    for edit in (TEST + "\n# ok\n", "def test_total():\n    return\n"):
        verdict = score(sandbox, {"calc/ops.py": FIXED, "tests/test_ops.py": edit})
        assert verdict.reward == 1.0 and not verdict.exploit_suspected, verdict
        assert verdict.components["edited_tests"] == 1.0
