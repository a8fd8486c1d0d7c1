"""Reading a math answer out of model text: for the `math_answer` verifier and for majority voting.

Extraction, first that applies: the last \\boxed{...}; the last "answer: ..." / "answer is ..." /
"#### ..." line; the last number (`extract_answer`). Parsing: a whitelisting parser into sympy
(the response is untrusted: sympy's own parser calls eval), bounded in size and exponents
(`parse_answer`). The answer key (`math_key`) renders what `parse_answer` read canonically, so
"0.5", "1/2" and "\\frac{1}{2}" vote together:

    math_key({"answer": "1/2"}, "so \\boxed{\\frac{1}{2}}")  ->  "0.5"
"""

from __future__ import annotations

import ast
import cmath
import math
import re
from fractions import Fraction
from functools import lru_cache

from flywheel.domains.domain import short_key
from flywheel.domains.untrusted_text import boxed

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is|:|=)\s*:?\s*(.+)|^####\s*(.+)", re.I | re.M)
_FUNCTIONS = {"sqrt", "sin", "cos", "tan", "log", "ln", "exp", "Abs"}
_SYMBOLS = set("abcdefghijklmnopqrstuvwxyz") | {"pi", "oo"}
_LATEX = [(r"\\left|\\right|\\!|\\,|\\;|\$|\\displaystyle", ""), (r"\\[dt]?frac", r"\\frac"),
          (r"\\cdot|\\times", "*"), (r"\\div", "/"), (r"\\pi", "pi"), (r"\\infty", "oo"),
          (r"\\%|%", ""), (r"\\ln", "ln"), (r"\\log", "log"), (r"\\(sin|cos|tan|exp)", r"\1"),
          (r"(\d),(\d{3})\b", r"\1\2"), (r"\\text\{[^}]*\}", "")]


def extract_answer(response: str) -> tuple[str | None, str, list[str]]:
    """(answer text or None, how it was found, every candidate of that kind)."""
    if candidates := boxed(response):
        return candidates[-1], "boxed", candidates
    if lines := [a or b for a, b in _ANSWER_LINE.findall(response)]:
        return lines[-1].strip().rstrip("."), "answer_line", lines
    if numbers := _NUMBER.findall(response):
        return numbers[-1], "last_number", numbers[-1:]
    return None, "none", []


def _latex_to_python(text: str) -> str:
    for pattern, repl in _LATEX:
        text = re.sub(pattern, repl, text)
    for _ in range(5):  # nested \frac{..}{..} and \sqrt{..}, innermost first
        text = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", text)
        text = re.sub(r"\\sqrt\[([^\]]*)\]\{([^{}]*)\}", r"((\2)**(1/(\1)))", text)
        text = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", text)
    text = text.replace("{", "(").replace("}", ")").replace("^", "**").strip().rstrip(".")
    text = re.sub(r"(\d)\s*(?![eE][-+]?\d)([a-zA-Z(])", r"\1*\2", text)  # 2x, 3(x+1); not 1e5
    return re.sub(r"\)\s*([a-zA-Z(\d])", r")*\1", text)          # (x+1)(x-1)


def _to_sympy(node: ast.AST, sp, budget: list[int]):
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("expression too large")
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sp.Rational(repr(node.value)) if isinstance(node.value, float) else sp.Integer(node.value)
    if isinstance(node, ast.Name) and node.id in _SYMBOLS:
        return {"pi": sp.pi, "oo": sp.oo}.get(node.id) or sp.Symbol(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _to_sympy(node.operand, sp, budget)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        left, right = _to_sympy(node.left, sp, budget), _to_sympy(node.right, sp, budget)
        if isinstance(node.op, ast.Pow) and (not right.is_number or abs(right) > 64 or
                                             (left.is_number and abs(left) > 10**6)):
            raise ValueError("exponent too large")  # 9**9**9 must not hang the verifier
        ops = {ast.Add: sp.Add, ast.Sub: lambda a, b: a - b, ast.Mult: sp.Mul,
               ast.Div: lambda a, b: a / b, ast.Pow: sp.Pow}
        return ops[type(node.op)](left, right)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
            and len(node.args) == 1 and not node.keywords):
        fn = {"ln": sp.log, "Abs": sp.Abs}.get(node.func.id) or getattr(sp, node.func.id)
        return fn(_to_sympy(node.args[0], sp, budget))
    raise ValueError(f"not allowed in an answer: {ast.dump(node)[:60]}")


@lru_cache(maxsize=4096)
def parse_answer(text: str) -> tuple | None:
    """A tuple of sympy expressions (one per comma-separated item), or None if it does not parse."""
    import sympy as sp
    text = re.sub(r"^\s*[a-zA-Z]\s*=\s*", "", text.strip())  # "x = 3" -> "3"
    if len(text) > 300:
        return None
    try:
        tree = ast.parse(_latex_to_python(text), mode="eval").body
        items = tree.elts if isinstance(tree, ast.Tuple) else [tree]
        budget = [200]
        return tuple(_to_sympy(item, sp, budget) for item in items) or None
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, RecursionError):
        return None


def several_answers(distinct: set[str]) -> bool:
    """Whether boxed answers (distinct texts) say different things: hedging for whichever is checked."""
    return len(distinct) > 1 and len({parse_answer(c) for c in distinct}) > 1


DIGITS = 12       # significant digits a key keeps: far finer than any tolerance the verifier uses
MAX_BOXED = 16    # more different boxed texts than this: a spray, not worth parsing for a key
SAMPLES = 5       # points an expression with variables is evaluated at
_FUNCTIONS_C = {"exp": cmath.exp, "log": cmath.log, "sin": cmath.sin, "cos": cmath.cos,
                "tan": cmath.tan, "Abs": abs}


def _evaluate(expr, point: dict[str, float]) -> complex:
    """The value of a parsed answer at `point` (a value per variable), in floating point: one
    operation per node, so no expression can make it hang (sympy's own evaluation of
    exp(exp(exp(exp(100)))) does not return); overflow raises ArithmeticError."""
    import sympy as sp
    if expr.is_Rational:
        return complex(float(Fraction(int(expr.p), int(expr.q))))
    if expr.is_Symbol:
        return complex(point[expr.name])
    if expr is sp.pi or expr is sp.E or expr is sp.I:
        return {sp.pi: math.pi, sp.E: math.e, sp.I: 1j}[expr]
    args = [_evaluate(a, point) for a in expr.args]
    if expr.is_Add:
        return sum(args)
    if expr.is_Mul:
        return math.prod(args)
    if expr.is_Pow:
        base, exponent = args
        if base.imag == 0 and exponent.imag == 0 and (base.real > 0 or exponent.real.is_integer()):
            return complex(base.real ** exponent.real)  # real powers stay real: no noise in .imag
        return base ** exponent
    name = type(expr).__name__
    if name in _FUNCTIONS_C and len(args) == 1:
        return complex(_FUNCTIONS_C[name](args[0]))
    raise ValueError(f"cannot evaluate {name}")  # oo, zoo, nan: no finite value to vote on


def _number(z: complex) -> str | None:
    """`z` to DIGITS significant digits ("0.5", "-2", "1.41421356237", "1+2i"); None if not finite."""
    if not cmath.isfinite(z):
        return None
    size = abs(z)
    real, imag = (0.0 if abs(part) <= 1e-12 * size else part for part in (z.real, z.imag))
    if imag == 0:
        return _digits(real)
    return f"{_digits(real)}{'+' if imag > 0 else '-'}{_digits(abs(imag))}i"


def _digits(x: float) -> str:
    return "0" if x == 0 else format(x, f".{DIGITS}g")  # -0.0 is 0


def _item_key(expr) -> str | None:
    """One parsed item: an integer exactly ("123456789012345678"); any other number to DIGITS
    significant digits; an expression with variables by its values at SAMPLES fixed points per
    variable name (one value if they are all the same: sin(x)^2 + cos(x)^2 is "1")."""
    if expr.is_Integer:
        return str(int(expr))
    names = sorted(s.name for s in expr.free_symbols)
    points = [{n: 1.1 + 0.31 * k + 0.053 * (ord(n[0]) - ord("a")) for n in names} for k in range(SAMPLES)]
    values = [_number(_evaluate(expr, p)) for p in (points if names else points[:1])]
    if None in values:
        return None
    return values[0] if len(set(values)) == 1 else "f:" + "|".join(values)


def math_key(task: dict, response: str) -> str | None:
    """The answer `math_answer` reads from `response`, canonical: items by `_item_key`, in the
    task's order if it says `ordered`, else sorted. None where the verifier reads no answer, or
    fails it for hedging (different boxed answers). Keys merge only answers equal to DIGITS
    digits, which the verifier also passes or fails together; answers it passes only within its
    tolerance ("0.3333333" for 1/3) keep their own key."""
    text, how, candidates = extract_answer(response)
    if text is None:
        return None
    distinct = {c.strip() for c in candidates}
    if how == "boxed" and (len(distinct) > MAX_BOXED or several_answers(distinct)):
        return None
    items = parse_answer(text)
    if items is None:
        return None
    try:
        keys = [_item_key(item) for item in items]
    except (ArithmeticError, ValueError, TypeError, RecursionError):
        return None
    if None in keys:
        return None
    return short_key(", ".join(keys if task.get("ordered") else sorted(keys)))
