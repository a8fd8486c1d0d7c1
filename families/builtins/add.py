"""Two-number addition, checked by numeric match: "17+58=" -> "75"."""

from __future__ import annotations

import math
import random
import re

from flywheel.domains.domain import Domain, short_key
from flywheel.domains.registry import register_domain

# Commas only as thousands separators: "4,2" is 4.2 in much of the world, so it is not 42.
_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+(\.\d*)?|\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text: str) -> float | None:
    """The number `text` writes (as `numeric_match` reads it), or None: not one, or not finite."""
    text = text.strip()
    if not _NUMBER.match(text):
        return None
    text = text.replace(",", "")
    value = float(text)
    return value if math.isfinite(value) else None


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

    def answer_key(self, task: dict, response: str) -> str | None:
        """The number, as `numeric_match` reads it: "75", "75.0", "7.5e1" -> "75"."""
        value = parse_number(response)
        if value is None:
            return None
        return short_key(str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value))
