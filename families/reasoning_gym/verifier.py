"""The `reasoning_gym` verifier: a reasoning-gym dataset's own `score_answer` on the answer.

The answer is the last <answer>...</answer> of the response (else the whole response). Some
reasoning-gym scorers `eval` the answer or hand it to sympy's `parse_expr` (which evals too), in
this trusted process; those answers are screened first, and one that could run code or blow up
(an exponent tower) scores 0 and is flagged instead of being scored.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction
from typing import Any

from flywheel.families.reasoning_gym.rg import RG_SEED, dataset, final_answer, scoring_dataset
from flywheel.verifiers import Verdict, register_verifier

# Scorers that call eval(answer) / sympy parse_expr(answer) (reasoning-gym 0.1.25).
EVALS = {"string_insertion", "spiral_matrix", "binary_matrix", "n_queens"}
PARSES = {"simple_integration", "intermediate_integration", "polynomial_multiplication",
          "puzzle24", "countdown"}
_MATH_NAMES = {"sin", "cos", "tan", "sec", "csc", "cot", "asin", "acos", "atan", "sinh", "cosh",
               "tanh", "exp", "log", "ln", "sqrt", "pi", "oo", "Abs", "abs"}
# Linear in the answer: names start at a word boundary, and a chained power's gap is bounded (an
# unbounded one rescanned the rest of the answer from every `**`).
_CODE_LIKE = re.compile(r"__|\b(import|lambda|eval|exec|open|getattr|globals|os|sys)\b|"
                        r"\b[A-Za-z_]\w*\s*\.\s*[A-Za-z_]\w*\s*\(|"
                        r"(\*\*|\^)\s*\(?[\w.\s]{0,100}\)?\s*(\*\*|\^)")
_LITERAL_NODES = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Name,
                  ast.Load, ast.UnaryOp, ast.USub, ast.UAdd)
# Scorers that accept junk in 0.1.25: game_of_life_halting compares bool(answer) with
# bool(expected), and both "True" and "False" are truthy, so any non-empty answer scored 1.0.
# coin_flip pays the length of the longest common prefix of the two numbers' digits, so "0" (a
# prefix of every probability below 1, "0.21875" included) scored 1.0 on almost every task.
STRICT = {"game_of_life_halting":
          lambda answer, entry: float(answer.strip().lower() == str(entry["answer"]).strip().lower()),
          "coin_flip": lambda answer, entry: float(_same_number(answer, entry["answer"], 1e-4))}


def _same_number(answer: str, oracle: str, tol: float) -> bool:
    """Both parse as numbers (decimals or fractions, commas ignored) within `tol` of each other,
    and within 1% of the oracle (so that "0" is not the answer to a probability of 3e-5)."""
    try:
        got, want = (float(Fraction(str(x).replace(",", "").strip())) for x in (answer, oracle))
    except (ValueError, ZeroDivisionError, OverflowError):
        return False
    return abs(got - want) <= min(tol, 0.01 * abs(want))


def safe_for_eval(answer: str) -> bool:
    """eval() of it runs no code: it is not a Python expression at all, or only literals and
    bare names (no calls, attributes, subscripts or operators that could allocate without bound)."""
    try:
        tree = ast.parse(answer.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return all(isinstance(node, _LITERAL_NODES) for node in ast.walk(tree))


def safe_for_sympy(answer: str) -> bool:
    """parse_expr() of it can only build a bounded arithmetic expression."""
    if len(answer) > 500 or not re.fullmatch(r"[\w\s+\-*/^().,=]*", answer) or "__" in answer:
        return False
    if any(len(n) > 1 and n not in _MATH_NAMES for n in re.findall(r"[A-Za-z_]\w*", answer)):
        return False
    powers = re.findall(r"(?:\*\*|\^)\s*\(?\s*([\w.]+)", answer)
    chained = re.search(r"(\*\*|\^)\s*\(?[\w.\s]*\)?\s*(\*\*|\^)", answer)
    return len(powers) <= 8 and not chained and all(
        not p.replace(".", "").isdigit() or float(p) <= 100 for p in powers)


# imported with this module in the bounded verifier's worker, off any deadline (verifiers/bounded.py)
WARM_IMPORTS = ("reasoning_gym",)


@register_verifier("reasoning_gym", "1")
def reasoning_gym(task: dict, response: str, execution: Any = None) -> Verdict:
    name = task["rg_dataset"]
    seed = int(task.get("rg_seed", RG_SEED))
    ds = scoring_dataset(name, seed)
    entry = task.get("rg_entry")  # hash-dependent generators carry their entry (families/reasoning_gym/rg.py)
    if not isinstance(entry, dict) or "question" not in entry:
        entry = dataset(name, seed)[int(task["rg_index"])]
    if entry["question"] not in str(task.get("prompt", entry["question"])):
        # Never score against another task than the one shown (a generator whose entries
        # depend on the hash seed, a row whose index and prompt disagree): nothing is scored.
        return Verdict(0.0, "error", {"entry_mismatch": 1.0},
                       detail=f"{name} index {task['rg_index']}: the entry rebuilt here is not the "
                              "task's")
    answer, tagged = final_answer(response)  # the domain's answer key reads the same way
    flags = ["multiple_answers"] if len(set(tagged)) > 1 else []
    unsafe = (name in EVALS and not safe_for_eval(answer)) or (name in PARSES and not safe_for_sympy(answer))
    if unsafe and _CODE_LIKE.search(answer):
        flags.append("code_in_answer")  # it would have run as code inside the scorer
    components = {"tagged": float(bool(tagged))}
    if flags:
        components.update({f"exploit_{f}": 1.0 for f in flags})
        return Verdict(0.0, "fail", components, True, f"exploit suspected: {', '.join(flags)}")
    if unsafe:  # never handed to a scorer that would eval it; plain junk, not an exploit
        return Verdict(0.0, "fail", components, detail="answer refused: not a safe expression")
    try:
        scorer = STRICT.get(name) or (lambda a, e: ds.score_answer(a, entry=e))
        score = float(scorer(answer, entry))
    except Exception as e:  # the scorer choking on a malformed answer is the answer's failure
        return Verdict(0.0, "fail", components, detail=f"score_answer raised {type(e).__name__}: {e}")
    # Only a correct answer earns reward: reasoning-gym's scorers pay small amounts for wrong
    # answers (0.01 for a well-formed wrong one, len(oracle)/len(answer) when the oracle is a
    # substring), which RL would learn to farm. The scorer's own figure stays a component.
    components["score"] = score
    solved = score >= 1.0
    return Verdict(float(solved), "pass" if solved else "fail", components)
