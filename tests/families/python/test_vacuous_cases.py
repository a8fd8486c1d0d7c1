"""python_tests gives nothing to a response that does not solve the task: vacuous test steps are not
cases, and nothing the solution raises or breaks can make trusted test code pass a case.

Run on the bubblewrap backend warm and cold (the harness is the same program on every backend; the
responses here are harmless to the host, so no isolation proof is needed first).
"""

import pytest

from flywheel.families.python.case_plan import case_names
from flywheel.domains.registry import get_domain
from flywheel.sandbox import SandboxError, get_backend
from flywheel.verifiers import get_verifier


@pytest.fixture(scope="module", params=["local", "local-cold"])
def score(request):
    try:
        backend = get_backend("local", **({"warm": False} if request.param == "local-cold" else {}))
    except SandboxError as e:
        pytest.skip(f"{request.param} cannot run here: {e}")

    def score(task, response):
        domain = get_domain(task["domain"])
        return get_verifier(domain.verifier)(task, response, backend.run(domain.request(task, response)))
    yield score
    backend.close()


def humaneval(entry, args, body, check):
    prompt = f"def {entry}({args}):\n    \"\"\"Solve it.\"\"\"\n"
    return {"task_id": f"t/{entry}", "domain": "python_tests", "prompt": prompt, "entry_point": entry,
            "test": "def check(candidate):\n" + "".join(f"    {line}\n" for line in check),
            "canonical_solution": body, "answer": ""}


VACUOUS = humaneval("double", "n", "    return 2 * n\n", [
    "assert True", "assert True, 'This prints if this assert fails 1 (good for debugging!)'",
    "assert 1 == 1", "import math", "assert math.pi > 3", "expected = 8",
    "assert candidate(2) == 4", "result = candidate(4)", "assert result == expected",
    "assert (lambda: True)()", "assert not False"])
PREDICATE = humaneval("is_even", "n", "    return n % 2 == 0\n", [
    "assert all(map(candidate, [2, 4, 6]))", "assert not any(map(candidate, [1, 3, 5]))",
    "assert list(filter(candidate, [1, 2, 3])) == [2]", "assert sum(map(candidate, [1, 3])) == 0"])
CATCHING = humaneval("double", "n", "    return 2 * n\n", [
    "try:\n        assert candidate(3) == 6\n    except Exception:\n        pass",
    "try:\n        assert candidate(5) == 10\n    except BaseException:\n        pass"])


def test_vacuous_steps_are_not_cases():
    assert case_names(VACUOUS) == ["hidden_0", "hidden_1"]   # candidate(2), and result kept for later
    helper = humaneval("twice", "n", "", ["assert True", "assert ok(3)", "assert 2 + 2 == 4"])
    helper["test"] = "def ok(n):\n    return twice(n) == 2 * n\n" + helper["test"]
    assert case_names(helper) == ["hidden_0"]                # a test helper that calls it counts
    with pytest.raises(ValueError, match="no assert that calls the solution"):
        case_names(humaneval("f", "n", "", ["assert True", "assert 1 == 1"]))


@pytest.mark.parametrize("response", [
    "    return 2 * n +\n",                                   # syntax error
    "",                                                       # nothing
    "I cannot do that.",
    "    pass\n",                                             # returns None
    "    raise StopIteration\n",
    "import sys\nsys.exit(0)\n",
])
def test_responses_that_do_not_solve_it_earn_nothing(score, response):
    v = score(VACUOUS, response)
    assert v.reward == 0.0 and v.verdict == "fail", v
    assert score(VACUOUS, VACUOUS["canonical_solution"]).reward == 1.0


RAISES = ["StopIteration", "StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt", "IndexError",
          "AttributeError", "KeyError", "AssertionError", "SystemExit", "RecursionError"]


@pytest.mark.parametrize("kind", RAISES)
def test_what_the_solution_raises_cannot_steer_the_tests(score, kind):
    """`raise StopIteration` inside `all(map(candidate, xs))` ended the map, so `all` said True."""
    for response in (f"    raise {kind}\n",
                     f"    raise {kind}('x')\n",
                     f"class {kind}(Exception):\n    pass\ndef is_even(n):\n    raise {kind}\n"):
        v = score(PREDICATE, response)
        assert v.reward == 0.0 and v.verdict == "fail", (response, v)
    assert score(PREDICATE, PREDICATE["canonical_solution"]).reward == 1.0


@pytest.mark.parametrize("response", ["    return 2 * n +\n", "import os\nos._exit(0)\n",
                                      "    while True:\n        pass\n", "    import os\n    os._exit(1)\n"])
def test_tests_that_catch_a_dead_solution_do_not_pass(score, response):
    v = score(CATCHING, response)
    assert v.reward == 0.0 and v.verdict == "fail", v


@pytest.mark.parametrize("response", [CATCHING["canonical_solution"], "    return 0\n", "    return None\n"])
def test_tests_that_cannot_fail_reward_no_one(score, response):
    """CATCHING's cases swallow their own assertion: any solution that answers passes them, so a
    constant does as well as the canonical solution, and none of them earns anything."""
    v = score(CATCHING, response)
    assert v.reward == 0.0 and v.components.get("trivial_baseline") == 1.0, v
