"""Write a Python expression with a given value; the expression is executed in the sandbox.

"expr 14:" -> "3*4+2". Many answers are right, which is where RL beats imitation: the verifier
runs the response as Python and accepts any arithmetic expression with a binary operator whose
printed value is the target and in which the target itself does not appear: "14*1" or "14+0"
copies the answer rather than computing it (the run of 2026-12-04 learned exactly that shortcut
for 256 of its 300 held-out answers), so it scores 0, and what RL can teach is arithmetic.
"""

from __future__ import annotations

import ast
import operator
import random

from flywheel.domains.domain import Domain, SandboxNeeds, short_key
from flywheel.domains.registry import register_domain
from flywheel.domains.untrusted_text import parse_python


_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
           ast.MatMult: operator.matmul}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Invert: operator.invert, ast.Not: operator.not_}
TARGETS = 100     # targets 0..99: two-digit arithmetic, which the tiny policy can learn to compute
MAX_BITS = 20_000  # an integer past this prints over 4,300 digits, which Python refuses to print


def expression_source(response: str) -> str:
    """The response as the program evaluates it: inside parentheses, on lines of their own."""
    return f"(\n{response}\n)"


def arithmetic_shape(response: str) -> tuple[bool, bool]:
    """(is_arithmetic, has_operator) of the response, read from its syntax tree, never its text:
    arithmetic means numbers (int or float), operators and parentheses only, so no call, name or
    string can print or exit in the expression's place; has_operator means a binary arithmetic
    operator (+ - * / // % **) is in the tree, so a comment or a string holding one does not count,
    nor a bare literal with a sign."""
    tree = parse_python(expression_source(response), mode="eval")
    if tree is None:
        return False, False
    nodes = list(ast.walk(tree))
    arithmetic = all(isinstance(n, _ALLOWED) or (isinstance(n, ast.Constant) and type(n.value) in (int, float))
                     for n in nodes)
    has_operator = any(isinstance(n, ast.BinOp) and isinstance(n.op, _OPERATORS) for n in nodes)
    return arithmetic, has_operator


def copies_target(response: str, target: int) -> bool:
    """Whether a number in the response's syntax tree equals the target ("14*1", "0+14", "14.0-0"
    for 14): such an expression copies the answer instead of computing it."""
    tree = parse_python(expression_source(response), mode="eval")
    if tree is None:
        return False
    return any(isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.value == target
               for n in ast.walk(tree))


def _value(node: ast.AST):
    """Python's own value of an arithmetic tree (depth <= MAX_DEPTH), refusing integers that would
    outgrow MAX_BITS before computing them: the sandbox's program would fail to print those."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_value(node.operand))
    left, right = _value(node.left), _value(node.right)
    if isinstance(left, int) and isinstance(right, int):  # bool too: (not 0) << 10**9
        bits = {ast.Pow: left.bit_length() * max(right, 0), ast.Mult: left.bit_length() + right.bit_length(),
                ast.LShift: left.bit_length() + max(right, 0)}.get(type(node.op), 0)
        if bits > MAX_BITS:
            raise OverflowError("integer too large to print")
    return _BINARY[type(node.op)](left, right)


def printed_value(response: str) -> str | None:
    """What the domain's program prints for `response` (the repr of its value), computed here
    without running it; None where `python_output` fails its shape (not arithmetic, or no binary
    operator) or the program would fail (division by zero, overflow, a value too long to print)."""
    arithmetic, has_operator = arithmetic_shape(response)
    if not (arithmetic and has_operator):
        return None
    try:
        return repr(_value(parse_python(expression_source(response), mode="eval").body))
    except (ArithmeticError, ValueError, TypeError):
        return None


@register_domain
class PythonExpression(Domain):
    name = "pyexpr"
    verifier = "python_output"
    sandbox = SandboxNeeds()
    description = ("expr N: -> a Python arithmetic expression (at least one operator) equal to N, "
                   "in which N itself does not appear")
    max_new_tokens = 10

    def sample_task(self, rng: random.Random) -> dict:
        target = rng.randrange(TARGETS)
        return {"prompt": f"expr {target}:", "answer": str(target)}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        """A sum, a difference or a product equal to N, none of whose numbers is N itself."""
        n = int(task["answer"])
        divisors = [d for d in range(2, 10) if n % d == 0 and d != n]
        kinds = ("add", "sub", "mul") if divisors and n > 1 else ("sub",) if n < 2 else ("add", "sub")
        kind = rng.choice(kinds)
        if kind == "add":
            b = rng.randint(1, n - 1)
            return f"{n - b}+{b}"
        if kind == "sub":
            b = rng.choice([b for b in range(1, 31) if b != n])
            return f"{n + b}-{b}"
        d = rng.choice(divisors)
        return f"{n // d}*{d}"

    def answer_key(self, task: dict, response: str) -> str | None:
        """The value the expression prints ("3*4+2" and "10+4" -> "14"), as `python_output` reads it;
        None for an expression that copies the target ("14*1"), which it scores 0."""
        target = str(task.get("answer", "")).strip()
        if target.lstrip("-").isdigit() and copies_target(response, int(target)):
            return None
        return short_key(printed_value(response) or "")

    def program(self, task: dict, response: str) -> dict:
        # The response is untrusted code: it runs only inside the sandbox.
        return {"files": {"main.py": f"value = {expression_source(response)}\nprint(repr(value))\n"},
                "command": ["python", "main.py"]}
