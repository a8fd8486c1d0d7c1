"""Pytest checks of repository tasks, for real: an environment holding pytest (copied from this
interpreter's site-packages, as `pip install --target` would lay it out; tests/families/conftest.py)
mounted in the local sandbox, a SWE-bench-style task whose test_patch adds the hidden tests, and the hacks the
scoring must see through."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.domains.environments import ENV_MOUNT
from flywheel.domains.tools import ToolCall, render_call
from flywheel.domains.tool_runner import ToolRunner
from flywheel.families.repository.unified_diff import make_diff

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
FIXED = OPS.replace("s -= x", "s += x")
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS}


@pytest.fixture
def swe_task(calc_row):
    """swe_task(**fields) -> the normalized task (tests/families/conftest.py: calc_row)."""
    return lambda **extra: get_domain("repo").normalize_task(calc_row(**extra))


def test_the_request_mounts_the_environment(swe_task, environments):
    domain = get_domain("repo")
    task = swe_task()
    assert domain.validate_task(task) == []
    request = domain.request(task, "")
    assert request.mounts == ((str(environments / "pytest-env"), ENV_MOUNT),)
    assert domain.request(swe_task(environment=None), "").mounts == ()
    [problem] = domain.validate_task(swe_task(environment="nowhere"))
    assert problem.startswith("field `environment`: no environment 'nowhere'") and "flywheel env build" in problem


def test_reference_passes_and_the_snapshot_fails(swe_task, environments, score):
    task = swe_task()
    verdict = score(task, task["reference_patch"])
    assert (verdict.reward, verdict.verdict) == (1.0, "pass"), verdict.detail
    verdict = score(task, "")
    assert verdict.reward == 0.0 and not verdict.exploit_suspected
    assert verdict.components["hidden_pass_rate"] == 0.0
    assert verdict.components["regression_pass_rate"] == 1.0
    assert "tests/test_x.py::test_total: failed" in verdict.detail


def test_module_and_pytest_checks_mix(swe_task, environments, score):
    task = swe_task(hidden_tests=[
        {"id": "tests/test_x.py::test_total", "pytest": "tests/test_x.py::test_total"},
        {"id": "m1", "module": "calc.ops", "call": "total([1, 2])", "expect": 3}])
    assert score(task, task["reference_patch"]).reward == 1.0
    verdict = score(task, "")
    assert verdict.components["hidden_pass_rate"] == 0.0 and "m1: got -3" in verdict.detail


def test_a_patch_editing_the_hidden_tests_is_flagged(swe_task, environments, score):
    """As SWE-bench: the edit is put back before the checks run (no penalty, a component)."""
    task = swe_task()
    cheat = make_diff(FILES, {"tests/test_x.py": "def test_total():\n    pass\n\n\ndef test_empty():\n    pass\n"})
    verdict = score(task, cheat)
    assert verdict.reward == 0.0 and not verdict.exploit_suspected
    assert "edited_tests" in verdict.detail and verdict.components["edited_tests"] == 1.0
    assert verdict.components["hidden_pass_rate"] == 0.0  # the task's own tests ran, not the model's


def test_an_exit_at_import_is_exited_early(swe_task, environments, score):
    task = swe_task()
    exits = make_diff(FILES, {"calc/ops.py": "import os; os._exit(0)\n" + FIXED})
    verdict = score(task, exits)
    assert verdict.reward == 0.0 and verdict.exploit_suspected and "exited_early" in verdict.detail


def test_a_skipped_hidden_test_is_not_a_pass(swe_task, environments, score):
    task = swe_task()
    skips = make_diff(FILES, {"calc/ops.py": "import pytest\n\n\ndef total(xs):\n    pytest.skip('later')\n"})
    verdict = score(task, skips)
    assert verdict.reward == 0.0 and "test_total: skipped: " in verdict.detail
    whole = make_diff(FILES, {"calc/ops.py": "import pytest\npytest.skip('no', allow_module_level=True)\n"})
    verdict = score(task, whole)  # the module is skipped: its node ids are not in the report
    assert verdict.reward == 0.0 and "not in pytest's report" in verdict.detail


def test_without_pytest_it_is_an_environment_error(swe_task, environments, score, sandbox):
    for task in (swe_task(environment=None), swe_task(environment="bare")):
        with pytest.raises(ValueError, match="the task's environment has no pytest"):
            score(task, task["reference_patch"])
        with pytest.raises(ValueError, match="the task's environment has no pytest"):
            score(task, "")  # a blank response too: Verify's blame rule then names the environment
    task = swe_task(environment="bare")  # what the sandbox itself says, for a verifier elsewhere
    result = get_domain("repo").run(sandbox, task, task["reference_patch"])
    assert '"pytest_missing": true' in result.stdout


def test_tools_see_the_environment(swe_task, environments, sandbox):
    domain, task = get_domain("repo"), swe_task()
    call = ToolCall("run_shell", {"command": "python -c 'import pytest; print(pytest.__file__)'"})
    step = domain.step(task, domain.start_state(task), render_call(call), ToolRunner(sandbox, retries=0))
    assert f"{ENV_MOUNT}/pytest/__init__.py" in step.observation, step.observation[-500:]


def test_a_test_patch_that_does_not_apply_is_the_tasks_fault(swe_task, environments, score):
    broken = "--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,1 +1,1 @@\n-no such line\n+x\n"
    task = swe_task(test_patch=broken)
    for response in (task["reference_patch"], ""):
        with pytest.raises(ValueError, match="test_patch does not apply"):
            score(task, response)
