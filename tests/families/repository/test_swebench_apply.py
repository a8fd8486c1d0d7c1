"""The answer applied as SWE-bench 5.x applies it (harnesses/apply_chain.py), in the local sandbox
with a pytest environment: a diff whose context drifted applies by `patch --fuzz` (git apply and
--reject refuse it) and scores 1; a diff that no tool applies scores 0, not applied; a right fix
that also edits setup.cfg and tox.ini (a planted [tool:pytest] addopts among them), adds a test
file and a reproduction script scores 1, as SWE-bench scores it, with the trusted pytest run
ignoring the planted configuration."""

import shutil

import pytest

from flywheel.domains.registry import get_domain
from flywheel.families.repository.unified_diff import make_diff

OPS = 'def total(xs):\n    """Sum."""\n    s = 0\n    for x in xs:\n        s -= x\n    return s\n'
FIXED = OPS.replace("s -= x", "s += x")
FILES = {"calc/__init__.py": "", "calc/ops.py": OPS, "setup.cfg": "[metadata]\nname = calc\n",
         "tox.ini": "[tox]\nenvlist = py311\n"}
TESTS = "from calc.ops import total\n\n\ndef test_total():\n    assert total([4, 5]) == 9\n"


@pytest.fixture
def task(environments):
    return get_domain("repo").normalize_task({
        "task_id": "calc-apply", "domain": "repo", "prompt": "total() subtracts.", "repo": {"files": FILES},
        "environment": "pytest-env", "test_patch": make_diff(FILES, {"tests/test_x.py": TESTS}),
        "hidden_tests": [{"id": "tests/test_x.py::test_total", "pytest": "tests/test_x.py::test_total"}]})


def test_the_fallback_chain_and_what_swebench_allows(task, score):
    drifted = make_diff({"calc/ops.py": OPS.replace("Sum.", "Add up.")},
                        {"calc/ops.py": FIXED.replace("Sum.", "Add up.")})
    fuzzed = score(task, drifted)
    assert (fuzzed.reward, fuzzed.exploit_suspected) == (1.0, False), fuzzed.detail
    if shutil.which("git") and shutil.which("patch"):  # the local sandbox sees the host's tools
        assert fuzzed.components["applied_leniently"] == 1.0 and "applied by patch --fuzz" in fuzzed.detail
    broken = score(task, make_diff({"calc/ops.py": "def other():\n    return 1\n"},
                                   {"calc/ops.py": "def other():\n    return 2\n"}))
    assert (broken.reward, broken.components.get("applied")) == (0.0, 0.0), broken.detail
    extra = score(task, make_diff(FILES, {
        "calc/ops.py": FIXED, "setup.cfg": FILES["setup.cfg"] + "version = 2\n\n[tool:pytest]\naddopts = -p evil\n",
        "tox.ini": FILES["tox.ini"] + "\n[pytest]\naddopts = -x -p evil\n",
        "tests/test_new.py": "def test_new():\n    assert False\n", "reproduce.py": "print('repro')\n"}))
    assert (extra.reward, extra.exploit_suspected) == (1.0, False), extra.detail
    assert "edited_tests" not in extra.components  # a new test file is allowed, not an edit
    wrong = score(task, make_diff(FILES, {"calc/ops.py": OPS.replace("s -= x", "s = x"),
                                          "tests/test_new.py": "def test_new():\n    pass\n"}))
    assert wrong.reward == 0.0
