"""Math domains scored by the `math_answer` verifier (final answer, numeric or symbolic match).

Each generator draws a small problem and its exact answer; the response may give the answer in
\\boxed{}, after "Answer:", or as its last number, in any equivalent form (3/4, 0.75, \\frac{3}{4}).
How an answer is read, for the verifier and for majority voting alike, is families/math/math_text.py.
"""

from __future__ import annotations

import random
from fractions import Fraction

from flywheel.domains.domain import Domain
from flywheel.families.math.math_text import math_key
from flywheel.domains.registry import register_domain

INSTRUCTION = " Put the final answer in \\boxed{}."

class MathDomain(Domain):
    verifier = "math_answer"
    max_new_tokens = 16

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return f"The answer is \\boxed{{{task['answer']}}}."

    def answer_key(self, task: dict, response: str) -> str | None:
        return math_key(task, response)


def _frac(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


@register_domain
class UserMath(MathDomain):
    name = "math"
    description = "your own math tasks (--tasks FILE: prompt, answer, optional tolerance/ordered)"

    def task_count(self) -> int | None:
        return 0


@register_domain
class LinearEquation(MathDomain):
    name = "math_linear"
    description = "solve a*x + b = c for x; the answer is a reduced fraction"

    def sample_task(self, rng: random.Random) -> dict:
        a, b, c = rng.choice([i for i in range(-9, 10) if i]), rng.randint(-20, 20), rng.randint(-20, 20)
        return {"prompt": f"Solve for x: {a}x + {b} = {c}." + INSTRUCTION,
                "answer": _frac(Fraction(c - b, a))}


@register_domain
class FractionSum(MathDomain):
    name = "math_fractions"
    description = "add two fractions; any equivalent form of the sum is right"

    def sample_task(self, rng: random.Random) -> dict:
        p, q = (Fraction(rng.randint(1, 9), rng.randint(2, 12)) for _ in range(2))
        return {"prompt": f"Compute {p} + {q}." + INSTRUCTION, "answer": _frac(p + q)}


@register_domain
class Derivative(MathDomain):
    name = "math_derivative"
    description = "differentiate a polynomial; checked symbolically (any equivalent expression)"

    def sample_task(self, rng: random.Random) -> dict:
        terms = {e: rng.randint(-9, 9) for e in rng.sample(range(0, 5), 3)}
        poly = " + ".join(f"{c}*x^{e}" for e, c in sorted(terms.items(), reverse=True) if c)
        deriv = " + ".join(f"{c * e}*x^{e - 1}" for e, c in sorted(terms.items(), reverse=True)
                           if c and e) or "0"
        return {"prompt": f"Differentiate f(x) = {poly or '0'} with respect to x." + INSTRUCTION,
                "answer": deriv}


@register_domain
class QuadraticRoots(MathDomain):
    name = "math_quadratic"
    description = "all roots of a monic quadratic with integer roots, in any order"

    def sample_task(self, rng: random.Random) -> dict:
        r, s = rng.randint(-9, 9), rng.randint(-9, 9)
        b, c = -(r + s), r * s
        roots = sorted({r, s})
        return {"prompt": f"Find all real roots of x^2 + ({b})x + ({c}) = 0, separated by commas."
                          + INSTRUCTION, "answer": ", ".join(map(str, roots))}


@register_domain
class Discount(MathDomain):
    name = "math_discount"
    description = "price after a percentage discount (word problem, tolerance 0.01)"

    def sample_task(self, rng: random.Random) -> dict:
        price, pct = rng.randint(10, 400), rng.choice([5, 10, 15, 20, 25, 30, 40, 50])
        item = rng.choice(["shirt", "lamp", "bicycle", "kettle", "backpack"])
        return {"prompt": f"A {item} costs ${price} and is discounted by {pct}%. What does it cost "
                          "now, in dollars?" + INSTRUCTION,
                "answer": f"{price * (100 - pct) / 100:.2f}", "tolerance": 1e-4}
