"""Two-number addition, checked by numeric match: "17+58=" -> "75"."""

from __future__ import annotations

import random

from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain


@register_domain
class Addition(Domain):
    name = "add"
    verifier = "numeric_match"
    description = "a+b= for two numbers below 100; the answer is the sum"
    max_new_tokens = 5

    def sample_task(self, rng: random.Random) -> dict:
        a, b = rng.randrange(100), rng.randrange(100)
        return {"prompt": f"{a}+{b}=", "answer": str(a + b)}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task["answer"]
