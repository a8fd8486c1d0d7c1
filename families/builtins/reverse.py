"""String reversal, checked by exact match: "rev:abcd=" -> "dcba"."""

from __future__ import annotations

import random
import string

from flywheel.domains.domain import Domain, short_key
from flywheel.domains.registry import register_domain


@register_domain
class Reverse(Domain):
    name = "reverse"
    verifier = "exact_match"
    description = "rev:<4-8 letters>=; the answer is the letters reversed"
    max_new_tokens = 10

    def sample_task(self, rng: random.Random) -> dict:
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 8)))
        return {"prompt": f"rev:{word}=", "answer": word[::-1]}

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task["answer"]

    def answer_key(self, task: dict, response: str) -> str | None:
        """The response stripped, as `exact_match` compares it (case and inner spaces count)."""
        return short_key(response.strip())
