"""Hostile answers against the real verifiers, through verify_attempt and a bounded worker.

Whatever the model wrote, the attempt gets a verdict within the deadline: a wrong or
unverifiable answer is `fail`, reward 0, stays in training (failure None), and any errors row is
of kind `model`. Only a verifier's own defect is `environment` (see test_bounded_worker.py).
"""

import json

import pytest

from flywheel.domains.registry import get_domain
from flywheel.transforms.expand import expand_task
from flywheel.transforms.verify import verify_attempt
from flywheel.verifiers.bounded import BoundedVerifier, Bounds


@pytest.fixture(scope="module")
def bounded():
    with BoundedVerifier(Bounds(deadline_s=3, memory_mb=512)) as worker:
        yield worker


def attempt(domain: str, response: str, index: int = 0):
    task = get_domain(domain).make_task("train", index, 0)
    one, = expand_task(task, run_id="t", iteration=0, policy_version=0, seed=0, n_samples=1,
                       temperature=0.0, mode="eval")
    return one.replace(response=response)


def assert_model_failure(out, error):
    assert (out.verdict, out.reward_raw, out.failure) == ("fail", 0.0, None), out.verdict_detail
    assert error is None or (error["kind"], error["stage"]) == ("model", "verify"), error


NESTED = "(" * 50_000 + "1" + ")" * 50_000  # 100 KB of nested brackets
HOSTILE_MATH = {
    "tower": "\\boxed{9**9**9**9}",
    "latex_tower": "The answer is \\boxed{10^{10^{10^{10}}}}",
    "nested_latex_powers": "\\boxed{{{{2^{64}}^{64}}^{64}}^{64}}",
    "exp_tower": "\\boxed{exp(exp(exp(exp(100))))}",
    "latex_exp_tower": "\\boxed{e^{e^{e^{e^{100}}}}}",
    "nested_factorials": "\\boxed{((100!)!)!}",
    "huge_integer": "\\boxed{" + "9" * 100_000 + "}",
    "huge_last_number": "so it is " + "7" * 100_000,
    "nested_brackets": "\\boxed{" + NESTED + "}",
    "nested_braces": "\\boxed{" + "{" * 50_000 + "1" + "}" * 50_000 + "}",
    "unclosed_boxes": "\\boxed{" * 20_000,
    "nested_boxes": "\\boxed{" * 20_000 + "}" * 20_000,
    "symbolic_blowup": "\\boxed{((x+1)**64-(x-1)**64)**64}",
    "sin_of_tower": "\\boxed{sin(10**64**2)}",
}


# One of each shape in the quick tier (a tower, a huge number, deep nesting, a symbolic blowup);
# the rest, each a verification run to its deadline (~7 s loaded), with the whole suite only.
QUICK_MATH = {"tower", "huge_integer", "nested_brackets", "symbolic_blowup"}


@pytest.mark.parametrize("name", [name if name in QUICK_MATH else pytest.param(name, marks=pytest.mark.slow)
                                  for name in sorted(HOSTILE_MATH)])
def test_hostile_math_answers_are_model_failures(bounded, name):
    out, error = verify_attempt(attempt("math_linear", HOSTILE_MATH[name]), bounded)
    assert_model_failure(out, error)


def test_an_answer_that_exhausts_the_verifier_has_a_model_errors_row(bounded):
    out, error = verify_attempt(attempt("math_linear", HOSTILE_MATH["exp_tower"]), bounded)
    assert_model_failure(out, error)
    assert error["error_type"] in ("verifier_deadline", "verifier_memory")
    right = attempt("math_linear", "")
    out, error = verify_attempt(right.replace(response=f"\\boxed{{{right.task['answer']}}}"), bounded)
    assert (out.verdict, out.reward_raw, error) == ("pass", 1.0, None)  # the worker came back


def invoice_with(**fields):
    task = get_domain("extract_invoice").make_task("train", 0, 0)
    return json.dumps({**task["expected"], **fields})


BIG = 10 ** 4000  # under Python's 4300-digit parse limit, far past a float
HOSTILE_JSON = {
    "huge_total": invoice_with(total=BIG),
    "huge_amounts": invoice_with(line_items=[{"description": "x", "quantity": BIG, "unit_price": BIG,
                                              "amount": BIG}], total=BIG),
    "huge_negative": invoice_with(total=-BIG),
    "too_many_digits": '{"total": ' + "9" * 5000 + "}",
    "float_overflow": invoice_with().replace('"total": ', '"total": 1e999, "x": '),
    "deep_lists": "[" * 900 + "]" * 900,
    "deep_objects": '{"a":' * 500 + "1" + "}" * 500,
    "deep_in_field": invoice_with(vendor="V").replace('"V"', "[" * 800 + "]" * 800),
    "nested_brackets_100kb": "[" * 50_000 + "]" * 50_000,
    "deep_block": "```json\n" + "[" * 2000 + "]" * 2000 + "\n```",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_JSON))
def test_hostile_structured_answers_score_zero_as_model_failures(bounded, name):
    out, error = verify_attempt(attempt("extract_invoice", HOSTILE_JSON[name]), bounded)
    assert out.verdict == "fail" and out.failure is None and out.reward_raw < 1.0
    assert error is None or error["kind"] == "model"


@pytest.mark.parametrize("name", ["huge_total", "deep_lists", "deep_objects", "deep_in_field"])
def test_structured_verifier_no_longer_raises_on_them(name):
    from flywheel.verifiers import get_verifier
    task = get_domain("extract_invoice").make_task("train", 0, 0)
    verdict = get_verifier("structured")(task, HOSTILE_JSON[name])
    assert verdict.verdict == "fail"


reasoning_gym = pytest.importorskip("reasoning_gym")

HOSTILE_RG = {
    "rg_polynomial_multiplication": [
        "*".join(f"(z+{k})**100" for k in range(1, 9)),
        "(" * 5000 + "z" + ")" * 5000,
        "9" * 100_000,
    ],
    "rg_n_queens": ["[" * 100_000, "[" * 5000 + "]" * 5000, "Q" * 100_000],
    "rg_chain_sum": ["9" * 100_000, "<answer>" + "1" * 50_000 + "</answer>"],
}


@pytest.mark.parametrize("domain,index", [  # each domain's first answer quick, the rest slow (as above)
    pytest.param(d, i, marks=[pytest.mark.slow] if i else []) for d, answers in HOSTILE_RG.items()
    for i in range(len(answers))])
def test_hostile_reasoning_gym_answers_are_model_failures(bounded, domain, index):
    out, error = verify_attempt(attempt(domain, HOSTILE_RG[domain][index]), bounded)
    assert_model_failure(out, error)


# Python too deep for the parser or its recursion: each raised out of program() or the verifier
# (RecursionError, MemoryError) where only SyntaxError was caught
DEEP_PYTHON = {
    "parentheses": "(" * 5000 + ")" * 5000,
    "unary_minus": "-" * 100_000 + "1",
    "attributes": "a" + ".b" * 100_000,
    "lists": "[" * 10_000 + "]" * 10_000,
    "nots": "not " * 50_000 + "x",
    "sum": "x" + "+1" * 100_000,
    "calls": "f(" * 3000 + ")" * 3000,
    "completion": "    return " + "-" * 100_000 + "1\n",
    "in_a_block": "```python\ndef running_max(xs):\n    return " + "a" + ".b" * 100_000 + "\n```",
    "after_a_function": "def running_max(xs):\n    return xs\nX = " + "-" * 100_000 + "1\n",
}


@pytest.mark.parametrize("domain", ["py_functions", "py_mbpp"])
@pytest.mark.parametrize("name", sorted(DEEP_PYTHON))
def test_python_too_deep_to_parse_is_a_failed_attempt(local_sandbox, domain, name):
    """Building the program and verifying its run never raise: the verifier is called directly
    (no worker to turn an exception into a verdict), on the real sandbox's result."""
    from flywheel.verifiers import get_verifier
    d = get_domain(domain)
    task = d.make_task("train", 0, 0)
    response = DEEP_PYTHON[name]
    spec = d.program(task, response)
    assert spec["files"]["solution.py"]
    verdict = get_verifier(d.verifier)(task, response, d.run(local_sandbox, task, response))
    assert (verdict.verdict, verdict.reward) == ("fail", 0.0), verdict
