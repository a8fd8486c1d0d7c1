"""Digits with a given sum, checked by a constraint: "digits 3 sum 12:" -> "813" (or "390", ...).

Like pyexpr, many answers are right, so RL can settle on a reliable strategy that imitation of
random demonstrations does not teach.
"""

from __future__ import annotations

import random

from flywheel.domains.domain import Domain, short_key
from flywheel.domains.registry import register_domain


@register_domain
class DigitSum(Domain):
    name = "digitsum"
    verifier = "digit_sum"
    description = "digits N sum S: -> N decimal digits whose sum is S"
    max_new_tokens = 8

    def sample_task(self, rng: random.Random) -> dict:
        n = rng.randint(2, 8)
        total = rng.randint(1, 9 * n - 1)
        return {"prompt": f"digits {n} sum {total}:", "answer": f"{n} {total}"}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        n, total = map(int, task["answer"].split())
        digits = [0] * n
        for _ in range(total):  # drop units into random non-full slots: a uniform-ish composition
            digits[rng.choice([i for i in range(n) if digits[i] < 9])] += 1
        return "".join(map(str, digits))

    def answer_key(self, task: dict, response: str) -> str | None:
        """The digits, as `digit_sum` reads them (leading zeros count: "0813" is four digits);
        None for anything but ASCII digits. Many answers are right, so votes split among them."""
        text = response.strip()
        return short_key(text) if text.isascii() and text.isdigit() else None
