"""The `function_points` verifier: a function body, run in the sandbox, gives the expected values
at every point of the task, hidden ones included (families/python/fix_function.py)."""

from __future__ import annotations

from typing import Any

from flywheel.families.python.fix_function import body_shape, computed_values
from flywheel.verifiers.registry import Verdict, register_verifier


@register_verifier("function_points", "1")
def function_points(task: dict, response: str, execution: Any = None) -> Verdict:
    """Pass when the body is arithmetic in `x` (its syntax tree says so: no calls, no other names,
    so it cannot print or exit in the function's place) and the program printed exactly the
    expected values; reward is the fraction of hidden points right, and 0 for a wrong shape.
    Every figure (reward, visible_pass_rate for best-of-N, hidden_pass_rate) reads the printed
    values only for an arithmetic body (`computed_values`): another body's printout is its own."""
    if execution is None:
        raise ValueError("function_points needs a sandbox execution result")
    arithmetic, uses_x = body_shape(response)
    points = task["visible"] + task["hidden"]
    ran = execution.exit_code == 0 and execution.kill_reason is None
    got = computed_values(response, execution)  # None for a body that could print its own values
    right = [got is not None and len(got) == len(points) and g == y
             for g, (_, y) in zip(got or [None] * len(points), points)]
    hidden = right[len(task["visible"]):]
    shaped = arithmetic and uses_x
    reward = sum(hidden) / len(hidden) if shaped and hidden else 0.0
    ok = shaped and all(right)
    return Verdict(reward if not ok else 1.0, "pass" if ok else "fail",
                   {"ran": float(ran), "arithmetic": float(arithmetic), "uses_x": float(uses_x),
                    "visible_pass_rate": float(all(right[:len(task["visible"])])),
                    "hidden_pass_rate": sum(hidden) / len(hidden) if hidden else 0.0})
