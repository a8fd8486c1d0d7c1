"""math_answer: extraction, numeric and symbolic comparison, malformed and hacking responses."""

import random
import time

import pytest

from flywheel.domains.registry import get_domain
from flywheel.verifiers import get_verifier
from flywheel.families.math.verifier import extract_answer, parse_answer

V = get_verifier("math_answer")
HALF = {"task_id": "m", "answer": "1/2"}
POLY = {"task_id": "p", "answer": "9x^2 - 2"}
ROOTS = {"task_id": "r", "answer": "2, 3"}


@pytest.mark.parametrize("task,response", [
    (HALF, "So the result is \\boxed{\\frac{1}{2}}."),
    (HALF, "Answer: 0.5"),
    (HALF, "We get 1 and 3 halves... the final answer is 1/2."),
    (HALF, "#### 0.50"),
    (HALF, "it is 0.5000000001"),                      # last number, within tolerance
    (POLY, "\\boxed{-2 + 9x^{2}}"),                    # symbolic: any equivalent form
    (POLY, "Answer: 3x \\cdot 3x - 2"),
    (ROOTS, "\\boxed{3, 2}"),                          # unordered list
    (ROOTS, "Answer: x = 2, 3"),
])
def test_correct_answers_in_many_forms(task, response):
    v = V(task, response)
    assert (v.reward, v.verdict) == (1.0, "pass"), (response, v)


@pytest.mark.parametrize("task,response", [
    (HALF, "\\boxed{0.51}"), (HALF, "Answer: 2"), (POLY, "\\boxed{9x^2 + 2}"), (ROOTS, "\\boxed{2}"),
    (ROOTS, "\\boxed{2, 3, 4}"),
])
def test_wrong_answers_fail(task, response):
    assert V(task, response).verdict == "fail"


@pytest.mark.parametrize("response", ["", "I don't know", "\\boxed{}", "\\boxed{1/}", "Answer: half",
                                      "\\boxed{nan}", "\\boxed{\\infty}"])
def test_malformed_answers_score_zero(response):
    v = V(HALF, response)
    assert v.reward == 0.0 and v.verdict == "fail"


def test_hacks_score_zero():
    spray = V(HALF, "\\boxed{1/3} or \\boxed{1/2} or \\boxed{2}")  # hedging with several answers
    assert spray.reward == 0.0 and spray.exploit_suspected
    assert V(HALF, "\\boxed{1/2} so \\boxed{0.5}").reward == 1.0    # the same answer twice is fine
    injected = "\\boxed{__import__('os').system('touch /tmp/flywheel-pwned')}"
    assert V(HALF, injected).reward == 0.0 and parse_answer("__import__('os')") is None
    start = time.monotonic()
    assert V(HALF, "\\boxed{9^{9^{9^{9}}}}").reward == 0.0           # an exponent tower: rejected
    assert V(HALF, "\\boxed{" + "(" * 500 + "1" + ")" * 500 + "}").reward == 0.0
    assert time.monotonic() - start < 2
    assert V(HALF, "1/2 1/3 1/4 0").reward == 0.0                      # listing numbers: the last counts


def test_extraction_order():
    assert extract_answer("answer: 3 but \\boxed{4}")[:2] == ("4", "boxed")
    assert extract_answer("answer: 3, finally")[0] == "3, finally"
    assert extract_answer("no digits")[0] is None


def test_a_broken_task_raises():
    with pytest.raises(ValueError, match="does not parse"):
        V({"task_id": "x", "answer": "import os"}, "1")


@pytest.mark.parametrize("name", ["math_linear", "math_fractions", "math_derivative", "math_quadratic",
                                  "math_discount"])
def test_generated_math_domains(name):
    d, rng = get_domain(name), random.Random(0)
    for i in range(20):
        task = d.make_task("train", i, 0)
        assert V(task, d.demonstration(task, rng)).verdict == "pass", task
        assert V(task, "\\boxed{123456789}").verdict == "fail", task
    assert d.make_task("heldout", 1, 3) == d.make_task("heldout", 1, 3)


@pytest.mark.parametrize("response,verdict", [
    ("\\boxed{123456900}", "fail"),               # 1e-6 of the answer's size would have passed it
    ("\\boxed{123456790}", "fail"),
    ("\\boxed{123456789.5}", "fail"),
    ("\\boxed{123456789}", "pass"),
    ("\\boxed{123456789.0000000001}", "pass"),    # float noise on an integer is still forgiven
])
def test_a_wrong_large_integer_is_not_close_enough(response, verdict):
    assert V({"task_id": "big", "answer": "123456789"}, response).verdict == verdict


def test_a_task_tolerance_stays_relative_to_its_answer():
    task = {"task_id": "price", "answer": "45.00", "tolerance": 1e-4}
    assert V(task, "\\boxed{45.004}").verdict == "pass"
