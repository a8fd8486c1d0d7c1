"""`chat_arith`: arithmetic word problems phrased for an instruct model, scored by `math_answer`.

    "Maya has 14 marbles and buys 27 more. How many marbles does Maya have now? Answer with
     just the number."  ->  "41"

One- and two-step problems (add, subtract, multiply, share equally, buy packs and give some
away) with small whole-number answers (2 to about 270), sized so that a 135M-parameter instruct
model gets some right before training. The verifier extracts the final answer
(\\boxed{}, an "Answer:" line, else the last number), so a model that explains first still
scores when its last number is right. No number in a prompt equals its answer: echoing the
question back never scores.
"""

from __future__ import annotations

import random

from flywheel.domains.domain import Domain
from flywheel.families.math.math_text import math_key
from flywheel.domains.registry import register_domain

NAMES = ["Maya", "Omar", "Lena", "Kofi", "Ines", "Ravi", "Tess", "Jun", "Noor", "Ben"]
THINGS = ["marbles", "stickers", "apples", "stamps", "pencils", "shells", "cards", "beads"]
INSTRUCTION = " Answer with just the number."


def _plus(rng, who, thing):
    a, b = rng.randint(3, 30), rng.randint(3, 20)
    return f"{who} has {a} {thing} and buys {b} more. How many {thing} does {who} have now?", a + b


def _minus(rng, who, thing):
    a = rng.randint(12, 40)
    b = rng.randint(2, 9)
    return f"{who} had {a} {thing} and gave {b} of them to a friend. How many {thing} are left?", a - b


def _times(rng, who, thing):
    a, b = rng.randint(2, 5), rng.randint(3, 10)
    return f"A box holds {b} {thing}. {who} fills {a} boxes. How many {thing} is that in all?", a * b


def _share(rng, who, thing):
    each, kids = rng.randint(2, 9), rng.randint(2, 5)
    return (f"{who} shares {each * kids} {thing} equally among {kids} children. How many "
            f"{thing} does each child get?", each)


def _packs(rng, who, thing):
    packs, per = rng.randint(2, 4), rng.randint(3, 6)
    gone = rng.randint(1, 5)
    return (f"{who} buys {packs} packs of {thing} with {per} in each pack, then gives away {gone}. "
            f"How many {thing} does {who} keep?", packs * per - gone)


def _trip(rng, who, _thing):
    speed, hours = rng.randint(2, 9) * 10, rng.randint(2, 3)
    return (f"{who} drives at {speed} km per hour for {hours} hours. How many km does {who} "
            "travel?", speed * hours)


PROBLEMS = (_plus, _minus, _times, _share, _packs, _trip)


@register_domain
class ChatArithmetic(Domain):
    name = "chat_arith"
    verifier = "math_answer"
    description = "arithmetic word problems for chat models; the final number is extracted"
    max_new_tokens = 64  # SmolLM2 works it out, then "#### N\nThe answer is N": room for both

    def sample_task(self, rng: random.Random) -> dict:
        who, thing = rng.choice(NAMES), rng.choice(THINGS)
        problem = rng.choice(PROBLEMS)
        for _ in range(100):  # no number of the question may be its answer
            text, answer = problem(rng, who, thing)
            if str(answer) not in {w.strip(".,?") for w in text.split()}:
                return {"prompt": text + INSTRUCTION, "answer": str(answer)}
        raise RuntimeError(f"chat_arith: {problem.__name__} drew no usable problem")

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return task["answer"]

    def answer_key(self, task: dict, response: str) -> str | None:
        """The final number, read and rendered as for the math domains ("41", "41.0", "\\boxed{41}")."""
        return math_key(task, response)
