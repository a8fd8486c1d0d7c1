"""Verifiers on correct, wrong, malformed and hacking responses, with real sandbox executions."""

import pytest

from flywheel.sandbox import get_backend
from flywheel.verifiers import get_verifier, register_verifier

ADD = {"task_id": "t", "answer": "42"}
EXPR = {"task_id": "e", "answer": "14", "prompt": "expr 14:"}


def test_numeric_match():
    v = get_verifier("numeric_match")
    assert v(ADD, " 42 ").verdict == "pass"
    assert v(ADD, "42.0").reward == 1.0
    assert v(ADD, "41").verdict == "fail"
    assert v(ADD, "forty-two").verdict == "fail"
    assert v(ADD, "").reward == 0.0
    assert v(ADD, "nan").verdict == "fail"
    big = {"task_id": "b", "answer": "1234567"}
    assert [v(big, r).verdict for r in ("1,234,567", "1234567", "+1,234,567.0", "1,2345,67", "12,34,567")] == \
        ["pass", "pass", "pass", "fail", "fail"]
    assert [v(ADD, r).verdict for r in ("4,2", "42,", ",42", "4,20", "42,000")] == ["fail"] * 5


def test_numeric_match_raises_on_a_broken_task():
    with pytest.raises(ValueError, match="not a number"):
        get_verifier("numeric_match")({"task_id": "x", "answer": "abc"}, "1")


def test_exact_match():
    v = get_verifier("exact_match")
    assert v({"answer": "dcba"}, "dcba\n").verdict == "pass"
    assert v({"answer": "dcba"}, "abcd").verdict == "fail"


def run_expr(response):
    from flywheel.domains.registry import get_domain
    with get_backend("local") as backend:
        execution = backend.run(get_domain("pyexpr").request(EXPR, response))
    return get_verifier("python_output")(EXPR, response, execution)


@pytest.mark.parametrize("response,verdict", [
    ("7*2", "pass"), ("10+4", "pass"), ("7*3", "fail"), ("14", "fail"),      # bare literal: no operator
    ("7*", "fail"),                                                           # syntax error
    ("print(14) or 0+0", "fail"),                                             # prints 14, then None
    ("__import__('sys').exit(0) or 1+1", "fail"),                              # exits 0 before printing
    ("__import__('os')._exit(0)+1", "fail"),
    ("14.0+0", "fail"),                                                       # value 14.0, not 14
])
def test_python_output_decides_from_the_recorded_result(response, verdict):
    assert run_expr(response).verdict == verdict


@pytest.mark.parametrize("response", [
    "14 # +", "14 # 7*2", "14  # 1-1\n", "14 #%", "+14", "--14", "-(-14)",     # operator only in a comment or a sign
    "int('7+7')", "len('14 chars: +-*/%..')", "14 if '+' else 0",              # operator in a string
    "print(14) or exit() or 1+1", "(print(14), exit())[0] + 1",                # prints 14 in the expression's place
    "14) or (0+0", "14)\nimport sys\nprint(14)\nsys.exit(0)\nx = (1+1",      # breaks out of the parentheses
    "__import__('sys').stdout.write('14\\n') and exit() or 1-1", "True*14+0", "abs(-14)+0",
])
def test_python_output_wants_an_arithmetic_expression_by_its_syntax(response):
    v = run_expr(response)
    assert v.verdict == "fail" and v.reward == 0.0, (response, v)


@pytest.mark.parametrize("response", ["7*2", "(7 * 2)", "28//2", "2**4-2", "0x0F-1", "1_0+4", "7 *\n2",
                                      "15 % 16 - 1 # a comment", "~-15+0"])
def test_python_output_passes_arithmetic_with_an_operator(response):
    assert run_expr(response).verdict == "pass", response


@pytest.mark.parametrize("response", ["14*1", "14+0", "0+14", "14-0", "14.0*1", "0x0E+0", "1*14",
                                      "(14)//1", "14**1", "0--14"])
def test_python_output_refuses_an_expression_that_copies_the_answer(response):
    """The task asks for the value computed: "14*1" holds the answer, so it scores 0."""
    v = run_expr(response)
    assert v.verdict == "fail" and v.components["computed"] == 0.0, (response, v)


def test_duplicate_verifier_names_are_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_verifier("exact_match", "2")(lambda t, r, e: None)


def test_in_range_accepts_any_whole_number_inside():
    v = get_verifier("in_range")
    task = {"answer": "23 41"}
    assert [v(task, r).verdict for r in ("23", "41", " 30\n", "22", "42", "3.5", "-30", "", "30x")] == \
        ["pass", "pass", "pass", "fail", "fail", "fail", "fail", "fail", "fail"]
