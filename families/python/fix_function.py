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
    thousands deep, a number of a million digits), so it is read by untrusted_text.load_json.
    Trust it only through `computed_values`, which reads it only for an arithmetic body."""
    lines = stdout.strip().splitlines()
    try:
        values = load_json(lines[-1]) if lines else None
    except Unreadable:
        return None
    return values if isinstance(values, list) else None


def computed_values(body: str, result) -> list | None:
    """The values f took at the program's points, or None when nothing trustworthy says so.

    Only the program's own `print` may speak for them: an arithmetic body (its syntax tree holds
    no call, name but `x`, or attribute, `body_shape`) cannot print, exit or choose the exit
    status, so the last line of a clean exit is the template's. Any other body could print the
    expected list itself (`__import__('sys').exit(print('[7]'))`), so its output is never read as
    values: it earns nothing however right its printout looks, per turn and at Verify alike."""
    arithmetic, _ = body_shape(body)
    if not arithmetic or result is None or result.exit_code != 0 or result.kill_reason:
        return None
    return printed_values(result.stdout)


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**12


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

    def validate_task(self, task: dict) -> list[str]:
        """A user's row: `visible` one [x, f(x)] pair (the prompt shows it), `hidden` a list of
        more pairs, each value an integer."""
        problems = super().validate_task(task)
        for name, one in (("visible", True), ("hidden", False)):
            pairs = task.get(name)
            if not isinstance(pairs, list) or (one and len(pairs) != 1) or not all(
                    isinstance(p, list) and len(p) == 2 and all(_integer(v) for v in p) for p in pairs):
                problems.append(f"field `{name}` must be a list of {'one' if one else ''} [x, f(x)] "
                                f"integer pair{'' if one else 's'}".replace("of  ", "of "))
        return problems

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
        if result.exit_code == 0 and not result.kill_reason and not body_shape(call.arguments["code"])[0]:
            return Step("not arithmetic in x", state, None, 0.0)  # what it printed is not read
        got = computed_values(call.arguments["code"], result)
        if got is None:
            error = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])[-1]
            return Step(error.split(":")[0][:40], state, None, 0.0)  # the error's class: short
        wrong = [f"f({x})={g}" for (x, y), g in zip(task["visible"], got) if g != y]
        if wrong:
            return Step(" ".join(wrong), state, None, 0.0)
        return Step("ok", state, SOLVED, 1.0)
