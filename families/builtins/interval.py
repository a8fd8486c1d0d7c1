"""Pick a whole number in a range, checked by a numeric constraint: "from 23 to 41:" -> "30".

Any number in the range is right. Imitating random demonstrations teaches "a number near these",
while RL can find a strategy that always works (such as copying a bound), which is where RL beats
imitation on a checker that accepts many answers.
"""

from __future__ import annotations

import random

from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain


@register_domain
class Interval(Domain):
    name = "interval"
    verifier = "in_range"
    description = "from A to B: -> a whole number N with A <= N <= B"
    max_new_tokens = 5

    def sample_task(self, rng: random.Random) -> dict:
        low = rng.randrange(1000)
        high = min(999, low + rng.randint(1, 60))
        return {"prompt": f"from {low} to {high}:", "answer": f"{low} {high}"}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        low, high = map(int, task["answer"].split())
        return str(rng.randint(low, high))

    def answer_key(self, task: dict, response: str) -> str | None:
        """The whole number, as `in_range` reads it ("007" -> "7"); None where it reads none."""
        text = response.strip()
        return str(int(text)) if text.isascii() and text.isdigit() and len(text) <= 12 else None
