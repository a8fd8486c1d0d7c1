"""The small built-in verifiers: exact and numeric match, a sandboxed expression's output,
digit sums and ranges."""

from __future__ import annotations

import math
from typing import Any

from flywheel.families.builtins.add import parse_number  # the add domain's answer key reads the same way
from flywheel.families.builtins.pyexpr import arithmetic_shape, copies_target
from flywheel.verifiers.registry import Verdict, register_verifier


def _binary(ok: bool, **components: float) -> Verdict:
    return Verdict(1.0 if ok else 0.0, "pass" if ok else "fail", {"correct": float(ok), **components})


@register_verifier("exact_match", "1")
def exact_match(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response, stripped of surrounding whitespace, equals the answer."""
    return _binary(response.strip() == str(task["answer"]).strip())


@register_verifier("numeric_match", "1")
def numeric_match(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response is a number equal to the answer within a relative tolerance of 1e-9."""
    got, want = parse_number(response), parse_number(str(task["answer"]))
    if want is None:
        raise ValueError(f"task {task.get('task_id')}: answer {task['answer']!r} is not a number")
    ok = got is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    return _binary(ok, parsed=float(got is not None))


@register_verifier("python_output", "2")
def python_output(task: dict, response: str, execution: Any = None) -> Verdict:
    """The sandboxed program exited 0, within its limits, and printed the answer's repr.

    The response must be an arithmetic expression (numbers, operators, parentheses) with a binary
    operator, as its syntax tree says: the task asks for one, so a bare literal, an operator only in
    a comment or a string, or code that prints the answer in the expression's place scores 0. And
    it must compute the answer, not copy it: an expression holding the answer as one of its
    numbers ("14*1", "14+0") scores 0 (version 2; version 1 accepted those). The output is read
    only for an arithmetic response, which cannot print (no call or name in its tree).
    """
    if execution is None:
        raise ValueError("python_output needs a sandbox execution result")
    arithmetic, has_operator = arithmetic_shape(response)
    ran = execution.exit_code == 0 and execution.kill_reason is None
    # Read only where the template's print is the only one: any other response could print the
    # answer itself, and its printout is then no figure at all (not even the `printed` component).
    printed = execution.stdout.strip() == repr(int(task["answer"])) if ran and arithmetic else False
    computed = not copies_target(response, int(task["answer"]))
    return _binary(ran and printed and arithmetic and has_operator and computed, ran=float(ran),
                   printed=float(printed), arithmetic=float(arithmetic),
                   has_operator=float(has_operator), computed=float(computed))


@register_verifier("digit_sum", "1")
def digit_sum(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response is exactly N decimal digits whose sum is S (answer holds "N S")."""
    n, total = map(int, str(task["answer"]).split())
    text = response.strip()
    well_formed = len(text) == n and text.isascii() and text.isdigit()
    ok = well_formed and sum(map(int, text)) == total
    return _binary(ok, well_formed=float(well_formed))


@register_verifier("in_range", "1")
def in_range(task: dict, response: str, execution: Any = None) -> Verdict:
    """The response is a whole number N with A <= N <= B (answer holds "A B")."""
    low, high = map(int, str(task["answer"]).split())
    text = response.strip()
    well_formed = text.isascii() and text.isdigit() and len(text) <= 12
    ok = well_formed and low <= int(text) <= high
    return _binary(ok, well_formed=float(well_formed))
