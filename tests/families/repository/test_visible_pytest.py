"""`run_visible_tests` runs pytest for real: a module with a test class, parametrization and a
fixture reports all 16 of its tests (the plain runner saw 2 functions, and no class), a node id
runs only its tests, the observation shows the first failures and a summary, bounded, and the
counts (the per-turn credit) come back signed: a pytest.ini the model writes changes nothing."""

import pytest

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import ToolRunner
from flywheel.domains.tools import ToolCall, render_call

OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
TESTS = '''import pytest

from calc.ops import total


@pytest.fixture
def numbers():
    return [1, 2, 3]


def test_fixture(numbers):
    assert total(numbers) == 6


@pytest.mark.parametrize("xs,want", [([], 0), ([1], 1), ([1, 2], 3), ([5, 5], 10), ([-1, 1], 0)])
def test_param(xs, want):
    assert total(xs) == want


class TestTotal:
    @pytest.mark.parametrize("n", range(5))
    def test_range(self, n):
        assert total(range(n)) == n * (n - 1) // 2

    def test_empty(self):
        assert total([]) == 0

    def test_one(self):
        assert total([7]) == 7

    def test_two(self):
        assert total([7, 1]) == 8

    def test_fixture_in_class(self, numbers):
        assert total(numbers) == 6

    def test_tuple(self):
        assert total((1, 1)) == 2
'''
DOMAIN = get_domain("repo")


def task(**extra):
    return DOMAIN.normalize_task({
        "task_id": "visible-pytest", "domain": "repo", "prompt": "total() subtracts.",
        "environment": "pytest-env",
        "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_calc.py": TESTS}},
        "visible_tests": ["tests/test_calc.py"],
        "hidden_tests": [{"id": "h", "module": "calc.ops", "call": "total([5, 6])", "expect": 11}], **extra})


def run(sandbox, state, task_, name, **arguments):
    return DOMAIN.step(task_, state, render_call(ToolCall(name, arguments)), ToolRunner(sandbox))


def test_a_test_class_parametrization_and_a_fixture_all_count(environments, sandbox):
    broken = run(sandbox, DOMAIN.start_state(task()), task(), "run_visible_tests")
    assert "== 5 passed, 11 failed" in broken.observation and broken.reward == 5 / 16, broken.observation


@pytest.mark.slow
def test_classes_parametrization_and_fixtures_all_run(environments, repo_sandbox):
    t = task()
    state = DOMAIN.start_state(t)
    broken = run(repo_sandbox, state, t, "run_visible_tests")
    assert "== 5 passed, 11 failed" in broken.observation, broken.observation
    assert broken.reward == 5 / 16
    assert "FAIL tests/test_calc.py::test_fixture" in broken.observation  # the first failures, with their errors
    assert "assert -6 == 6" in broken.observation and "[... 6 more failures]" in broken.observation
    assert len(broken.observation) < 6000
    fixed = run(repo_sandbox, state, t, "edit_file", path="calc/ops.py", old="s -= x", new="s += x")
    passing = run(repo_sandbox, fixed.state, t, "run_visible_tests")
    assert "== 16 passed, 0 failed" in passing.observation and passing.reward == 1.0, passing.observation
    one_class = run(repo_sandbox, fixed.state, t, "run_visible_tests", paths=["tests/test_calc.py::TestTotal"])
    assert "== 10 passed, 0 failed" in one_class.observation, one_class.observation
    # a pytest.ini the model writes (addopts deselecting the failures) is not read: counts hold
    planted = run(repo_sandbox, state, t, "write_file", path="pytest.ini",
                  content="[pytest]\naddopts = -k 'not param and not fixture'\n")
    still = run(repo_sandbox, planted.state, t, "run_visible_tests")
    assert "== 5 passed, 11 failed" in still.observation and still.reward == 5 / 16, still.observation
