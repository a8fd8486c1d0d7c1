"""Fix a failing function with test feedback: a multi-turn domain the tiny policy can learn.

    prompt:  "fix x-3 f(4)=7:"     f(x) = x-3 fails its test f(4) == 7
    turn 1:  "x*3"                  run_tests -> "f(4)=12 want 7"
    turn 2:  "x+3"                  run_tests -> "ok" (solved)

The bug is the operator (one of + - * //); the constant is right. The response is the fixed
function body, an arithmetic expression in `x`, run for real in the sandbox. Its score comes
from hidden points the prompt does not show, so a body that only fits the visible test (or a
constant) fails. One turn must work the operator out from the test; with feedback, a policy
that just avoids repeating a refuted operator finds it within three turns.
"""

from __future__ import annotations

import ast
import json
import random

from flywheel.domains.episodes import SOLVED, EpisodeDomain, Step
from flywheel.domains.domain import SandboxNeeds
from flywheel.domains.registry import register_domain
from flywheel.domains.tools import RUN_TESTS, SUBMIT
from flywheel.domains.untrusted_text import Unreadable, load_json, parse_python

OPS = ("+", "-", "*", "//")
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Load)


def apply(op: str, x: int, c: int) -> int:
    return {"+": x + c, "-": x - c, "*": x * c, "//": x // c}[op]


def body_shape(body: str) -> tuple[bool, bool]:
    """(arithmetic, uses_x): the body is numbers, `x`, operators and parentheses only (read from
    its syntax tree), and `x` occurs in it."""
    tree = parse_python(f"(\n{body}\n)", mode="eval")
    if tree is None:
        return False, False
    nodes = list(ast.walk(tree))
    names = [n for n in nodes if isinstance(n, ast.Name)]
    arithmetic = all(isinstance(n, _ALLOWED) or (isinstance(n, ast.Name) and n.id == "x")
                     or (isinstance(n, ast.Constant) and type(n.value) is int) for n in nodes)
    return arithmetic, bool(names)


def points_program(body: str, xs: list[int]) -> dict:
    """The sandbox program: f defined by `body`, printed at `xs` as one JSON list."""
    source = (f"def f(x):\n    return (\n{body}\n)\n\nimport json\n"
              f"print(json.dumps([f(x) for x in {json.dumps(xs)}]))\n")
    return {"files": {"main.py": source}, "command": ["python", "main.py"]}


def printed_values(stdout: str) -> list | None:
    """The JSON list the program printed last, or None: the line is the body's to shape (nested
    thousands deep, a number of a million digits), so it is read by untrusted_text.load_json."""
    lines = stdout.strip().splitlines()
    try:
        values = load_json(lines[-1]) if lines else None
    except Unreadable:
        return None
    return values if isinstance(values, list) else None


@register_domain
class FixFunction(EpisodeDomain):
    name = "fix_function"
    verifier = "function_points"
    description = "fix x-3 f(4)=7: -> the body with the right operator; multi-turn with test feedback"
    sandbox = SandboxNeeds(files=("main.py",))
    tools = (RUN_TESTS, SUBMIT)
    plain_tool = RUN_TESTS.name
    max_turns = 3
    max_new_tokens = 8

    def sample_task(self, rng: random.Random) -> dict:
        while True:
            c, x = rng.randint(2, 9), rng.randint(2, 9)
            right, wrong = rng.sample(OPS, 2)
            hidden = rng.sample(range(10, 60), 3)
            if all(len({apply(op, v, c) for op in OPS}) == len(OPS) for v in (x, *hidden)):
                break
        y = apply(right, x, c)
        return {"prompt": f"fix x{wrong}{c} f({x})={y}:", "body": f"x{wrong}{c}",
                "visible": [[x, y]], "hidden": [[v, apply(right, v, c)] for v in hidden],
                "answer": f"x{right}{c}"}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task["answer"]

    def demonstration_turns(self, task: dict, rng: random.Random) -> list[tuple[str, str | None]]:
        """Half the time a refuted guess first, then the fix: reading the feedback is shown too."""
        (x, _), = task["visible"]
        right, c = task["answer"][1:-1], int(task["answer"][-1])  # "x{op}{c}", c a digit
        if rng.random() < 0.5:
            return [(task["answer"], None)]
        guess = rng.choice([o for o in OPS if o != right])
        return [(f"x{guess}{c}", f"f({x})={apply(guess, x, c)}"), (task["answer"], None)]

    def program(self, task: dict, response: str) -> dict:
        points = task["visible"] + task["hidden"]
        return points_program(response, [x for x, _ in points])

    def tool_program(self, task: dict, state: dict, call) -> dict:
        return points_program(call.arguments["code"], [x for x, _ in task["visible"]])

    def observe(self, task: dict, state: dict, call, result) -> Step:
        state = {**state, "answer": call.arguments["code"]}
        got = printed_values(result.stdout) if result.exit_code == 0 else None
        if got is None:
            error = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])[-1]
            return Step(error.split(":")[0][:40], state, None, 0.0)  # the error's class: short
        wrong = [f"f({x})={g}" for (x, y), g in zip(task["visible"], got) if g != y]
        if wrong:
            return Step(" ".join(wrong), state, None, 0.0)
        return Step("ok", state, SOLVED, 1.0)
