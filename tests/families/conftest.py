"""Shared fixtures: one real sandbox backend per test module, and a scorer that runs a domain's
program in it with the program's own limits, then the domain's verifier (no mocks)."""

import contextlib
import os

import pytest

from flywheel.domains.registry import get_domain
from flywheel.sandbox import get_backend
from flywheel.verifiers import get_verifier


def concurrently(check, items, workers=4):
    """check(item) for every item, `workers` at a time, as a rollout runs attempts (the sandbox
    takes concurrent runs); their results in order, the first failure raised as it was."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(check, items))


@pytest.fixture(scope="module")
def sandbox():
    with get_backend("local") as backend:
        yield backend


@pytest.fixture(scope="module")
def score(sandbox):
    """score(task, response) -> Verdict, through the task's domain, its sandbox and its verifier."""
    def score(task, response):
        domain = get_domain(task["domain"])
        execution = domain.run(sandbox, task, response) if domain.uses_sandbox else None
        return get_verifier(domain.verifier)(task, response, execution)
    return score


@pytest.fixture(scope="module")
def play():
    """play(task, sandbox, calls) -> (the final answer's verdict, the last state, the last step):
    `calls` ({"name", "arguments"}) replayed as a repository episode's actions in the real
    sandbox, each asserted to run without an error observation, then the answer scored."""
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.domains.tools import ToolCall, render_call

    def play(task, sandbox, calls):
        domain = get_domain(task["domain"])
        runner, state, step = ToolRunner(sandbox), domain.start_state(task), None
        for call in calls:
            step = domain.step(task, state, render_call(ToolCall(call["name"], call["arguments"])), runner)
            assert not step.observation.startswith("error"), (task["task_id"], call, step.observation)
            state = step.state
            if step.done:
                break
        diff = domain.final_response(task, state)
        verdict = get_verifier(domain.verifier)(task, diff, domain.run(sandbox, task, diff))
        return verdict, state, step
    return play


# -- repository tasks with pytest checks (test_repo_pytest.py, test_repo_environments.py) --------
PYTEST_PACKAGES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "pygments")
CALC_OPS = "def total(xs):\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n"
CALC_FILES = {"calc/__init__.py": "", "calc/ops.py": CALC_OPS}
CALC_TESTS = ("from calc.ops import total\n\n\n"
              "def test_total():\n    assert total([4, 5]) == 9\n\n\n"
              "def test_empty():\n    assert total([]) == 0\n")


def copy_packages(target):
    """pytest and its dependencies from this interpreter, laid out as `pip install --target` does."""
    import importlib.util
    import shutil
    from pathlib import Path
    Path(target).mkdir(parents=True, exist_ok=True)
    for name in PYTEST_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(origin.parent, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, target / origin.name)


@contextlib.contextmanager
def environments_root(root, **more):
    """$FLYWHEEL_ENVIRONMENTS set to `root` (and each NAME=value of `more` set) for the block,
    then as they were: module-scoped fixtures cannot take the monkeypatch fixture."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"FLYWHEEL_ENVIRONMENTS": root, **more}.items():
            patch.setenv(name, str(value))
        yield root


@pytest.fixture(scope="module")
def environments():
    """$FLYWHEEL_ENVIRONMENTS for the module: `pytest-env` holds pytest (copied from this
    interpreter), `bare` nothing. Under /tmp, not pytest's 0700 tmp dir: the sandbox's uid must
    reach it."""
    import shutil
    import tempfile
    from pathlib import Path
    root = Path(tempfile.mkdtemp(prefix="flywheel-envs-test-"))
    (root / "pytest-env").mkdir()
    copy_packages(root / "pytest-env")
    (root / "bare").mkdir()
    for here, _, files in os.walk(root):
        os.chmod(here, 0o755)
        for name in files:
            os.chmod(os.path.join(here, name), 0o644)
    with environments_root(root):
        yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def calc_row():
    """calc_row(**fields) -> a SWE-bench-style repo task row: total() subtracts; the test_patch
    adds tests/test_x.py (test_total fails before the fix, test_empty passes throughout)."""
    from flywheel.families.repository.unified_diff import make_diff

    def calc_row(**extra):
        row = {"task_id": "calc-pytest", "domain": "repo", "prompt": "total() subtracts.",
               "repo": {"files": CALC_FILES}, "environment": "pytest-env",
               "test_patch": make_diff({}, {"tests/test_x.py": CALC_TESTS}),
               "reference_patch": make_diff(CALC_FILES, {"calc/ops.py": CALC_OPS.replace("-=", "+=")}),
               "hidden_tests": [{"id": "tests/test_x.py::test_total", "pytest": "tests/test_x.py::test_total"}],
               "regression_tests": [{"id": "tests/test_x.py::test_empty", "pytest": "tests/test_x.py::test_empty"}]}
        return {**row, **extra}
    return calc_row


@pytest.fixture(scope="module", params=["local", "docker"])
def repo_sandbox(request, sandbox):
    """The local sandbox, and docker (its minimal image: the host's Python, sh)."""
    if request.param == "local":
        yield sandbox
        return
    backend = request.getfixturevalue("docker_daemon").backend()
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def render_env():
    """$FLYWHEEL_ENVIRONMENTS with the `render` environment (matplotlib, numpy, pillow for the
    render domains' harness), copied once from this interpreter under /tmp
    (families/render/render_environment.py), where the sandbox's uid can read it."""
    import tempfile
    pytest.importorskip("matplotlib", reason="the render environment is copied from this "
                                             "interpreter's matplotlib")
    from flywheel.families.render.render_environment import copy_installed
    with environments_root(os.path.join(tempfile.gettempdir(), "flywheel-render-envs")) as root:
        copy_installed()
        yield root
