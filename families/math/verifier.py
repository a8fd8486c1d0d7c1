"""The `math_answer` verifier: extract a final answer, compare it numerically or symbolically.

Extraction, first that applies: the last \\boxed{...}; the last "answer: ..." / "answer is ..." /
"#### ..." line; the last number. Comparison: both sides become sympy expressions through a
whitelisting parser (the response is untrusted: sympy's own parser calls eval), then numbers are
compared within a tolerance and expressions by simplification plus evaluation at sample points.
Comma-separated answers are lists (unordered unless the task says `ordered`).
"""

from __future__ import annotations

from typing import Any

# How an answer is read lives with the math domains, whose answer key reads it the same way.
from flywheel.families.math.math_text import extract_answer, parse_answer, several_answers
from flywheel.verifiers import Verdict, register_verifier


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


# imported with this module in the bounded verifier's worker, off any deadline (verifiers/bounded.py)
WARM_IMPORTS = ("sympy",)


@register_verifier("math_answer", "1")
def math_answer(task: dict, response: str, execution: Any = None) -> Verdict:
    want = parse_answer(str(task["answer"]))
    if want is None:
        raise ValueError(f"task {task.get('task_id')}: answer {task['answer']!r} does not parse")
    text, how, candidates = extract_answer(response)
    got = parse_answer(text) if text is not None else None
    distinct = {c.strip() for c in candidates}
    spray = how == "boxed" and several_answers(distinct)
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
