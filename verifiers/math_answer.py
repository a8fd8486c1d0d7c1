"""The `math_answer` verifier: extract a final answer, compare it numerically or symbolically.

Extraction, first that applies: the last \\boxed{...}; the last "answer: ..." / "answer is ..." /
"#### ..." line; the last number. Comparison: both sides become sympy expressions through a
whitelisting parser (the response is untrusted: sympy's own parser calls eval), then numbers are
compared within a tolerance and expressions by simplification plus evaluation at sample points.
Comma-separated answers are lists (unordered unless the task says `ordered`).
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from typing import Any

from flywheel.domains.untrusted_text import boxed
from flywheel.verifiers import Verdict, register_verifier

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


def equivalent(got, want, rel_tol: float = 1e-6, abs_tol: float = 1e-9,
               integers_exact: bool = True) -> bool:
    """Whether `got` equals `want`: numbers within `rel_tol` of the answer's size, except that an
    integer answer (with `integers_exact`) is measured on the unit scale, so a wrong large integer
    (123456900 for 123456789) never passes as "close"; expressions symbolically or by sampling."""
    import sympy as sp
    try:
        if got.is_number and want.is_number:
            g, w = complex(sp.N(got)), complex(sp.N(want))
            scale = 1.0 if integers_exact and want.is_Integer else abs(w)
            return abs(g - w) <= abs_tol + rel_tol * scale
        diff = got - want
        if sp.simplify(diff) == 0:
            return True
        symbols = sorted(diff.free_symbols, key=str)
        points = [dict(zip(symbols, (sp.Rational(k + 2, 3 + i) for i in range(len(symbols)))))
                  for k in range(5)]
        return all(abs(complex(sp.N(diff.subs(p)))) <= abs_tol + rel_tol * abs(complex(sp.N(want.subs(p))))
                   for p in points)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False


def answers_match(got: tuple, want: tuple, ordered: bool, rel_tol: float,
                  integers_exact: bool = True) -> bool:
    if len(got) != len(want):
        return False
    same = lambda g, w: equivalent(g, w, rel_tol, integers_exact=integers_exact)  # noqa: E731
    if ordered:
        return all(same(g, w) for g, w in zip(got, want))
    left = list(got)
    for w in want:  # unordered: match each expected item to a distinct given one
        hit = next((i for i, g in enumerate(left) if same(g, w)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


@register_verifier("math_answer", "1")
def math_answer(task: dict, response: str, execution: Any = None) -> Verdict:
    want = parse_answer(str(task["answer"]))
    if want is None:
        raise ValueError(f"task {task.get('task_id')}: answer {task['answer']!r} does not parse")
    text, how, candidates = extract_answer(response)
    got = parse_answer(text) if text is not None else None
    distinct = {c.strip() for c in candidates}
    spray = how == "boxed" and len(distinct) > 1 and len({parse_answer(c) for c in distinct}) > 1
    # A task's own tolerance is relative to its answer, as its author wrote it; the default
    # tolerance forgives float noise but not a wrong integer.
    ok = got is not None and not spray and answers_match(
        got, want, bool(task.get("ordered")), float(task.get("tolerance") or 1e-6),
        integers_exact=not task.get("tolerance"))
    components = {"extracted": float(text is not None), "parsed": float(got is not None),
                  "correct": float(ok)}
    if spray:  # several different boxed answers: hedging for whichever one is checked
        components["exploit_multiple_answers"] = 1.0
        return Verdict(0.0, "fail", components, True, f"{len(distinct)} different boxed answers")
    return Verdict(float(ok), "pass" if ok else "fail", components,
                   detail=f"{how}: {text!r}" if not ok else "")
