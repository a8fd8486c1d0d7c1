"""`chat_code`: short Python functions asked for in chat, checked by unit tests in the sandbox
(`python_tests` verifier, MBPP format: one example shown in the prompt, three hidden cases).

    "Write a Python function `add_to_each(nums)` that returns a new list with 7 added to each
     number in nums. For example, `add_to_each([1, 2])` should return `[8, 9]`. Reply with the
     function in a ```python code block."

Twelve families of one-line functions, each with a drawn parameter (the number to add, the letter
to count, the range to clamp to) and drawn inputs; the expected values come from the family's
reference function, whose source (the same formula) is the demonstration. Generated from the
seed, nothing downloaded. The harness also runs constant and identity baselines, so a function
that passes only what `return x` passes earns nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from flywheel.families.python.python_tests import PythonTestsDomain
from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain

LETTERS = "abcdeilmnorst"
WORDS = ["apple", "river", "stone", "light", "bread", "music", "cloud", "tiger", "lemon", "paper",
         "green", "ocean", "sun", "cat", "moon", "train"]


@dataclass(frozen=True)
class Family:
    name: str                               # the function's name
    arg: str                                # its one parameter
    does: str                               # "returns ...", with {p} for the drawn parameter
    body: str                               # the reference's return expression, with {p}
    param: Callable[[random.Random], Any]   # draws the parameter
    inputs: Callable[[random.Random, Any], Any]  # draws one input, given the parameter
    fn: Callable[[Any, Any], Any]           # (parameter, input) -> the expected output


def _nums(rng, lo=-20, hi=50, k=(3, 5)):
    return [rng.randint(lo, hi) for _ in range(rng.randint(*k))]


def _text(rng, _p=None):
    return " ".join(rng.sample(WORDS, rng.randint(2, 4)))


FAMILIES = (
    Family("add_to_each", "nums", "returns a new list with {p} added to each number in nums",
           "[x + {p} for x in nums]", lambda r: r.randint(2, 20), lambda r, p: _nums(r),
           lambda p, x: [v + p for v in x]),
    Family("count_letter", "text", "returns how many times the lowercase letter '{p}' appears in text",
           "text.count('{p}')", lambda r: r.choice(LETTERS), _text, lambda p, x: x.count(p)),
    Family("sum_multiples", "n", "returns the sum of all positive integers below n that are "
           "multiples of {p}", "sum(i for i in range(1, n) if i % {p} == 0)",
           lambda r: r.randint(2, 7), lambda r, p: r.randint(p + 2, 60),
           lambda p, n: sum(i for i in range(1, n) if i % p == 0)),
    Family("clamp", "x", "returns x limited to the range {p[0]} to {p[1]}: smaller values become "
           "{p[0]}, larger ones {p[1]}", "max({p[0]}, min({p[1]}, x))",
           lambda r: (r.randint(-10, 10), r.randint(20, 40)), lambda r, p: r.randint(p[0] - 30, p[1] + 30),
           lambda p, x: max(p[0], min(p[1], x))),
    Family("is_multiple", "n", "returns True if n is divisible by {p}, otherwise False",
           "n % {p} == 0", lambda r: r.randint(3, 9),
           lambda r, p: r.randint(1, 20) * p + r.choice([0, 0, 1, 2]), lambda p, n: n % p == 0),
    Family("longest_word", "sentence", "returns the longest word of sentence (the first one if "
           "several are equally long)", "max(sentence.split(), key=len)", lambda r: None, _text,
           lambda p, s: max(s.split(), key=len)),
    Family("reverse_words", "sentence", "returns the words of sentence in reverse order, joined by "
           "single spaces", "' '.join(reversed(sentence.split()))", lambda r: None, _text,
           lambda p, s: " ".join(reversed(s.split()))),
    Family("spread", "nums", "returns the largest number in nums minus the smallest",
           "max(nums) - min(nums)", lambda r: None, lambda r, p: _nums(r),
           lambda p, x: max(x) - min(x)),
    Family("repeat_chars", "text", "returns text with each character repeated {p} times",
           "''.join(c * {p} for c in text)", lambda r: r.randint(2, 3),
           lambda r, p: r.choice(WORDS), lambda p, s: "".join(c * p for c in s)),
    Family("count_vowels", "text", "returns how many of the characters of text are the vowels "
           "a, e, i, o or u", "sum(c in 'aeiou' for c in text)", lambda r: None, _text,
           lambda p, s: sum(c in "aeiou" for c in s)),
    Family("size_label", "n", "returns 'big' if n is greater than {p}, otherwise 'small'",
           "'big' if n > {p} else 'small'", lambda r: r.randint(10, 90),
           lambda r, p: r.randint(p - 15, p + 15), lambda p, n: "big" if n > p else "small"),
    Family("evens", "nums", "returns the even numbers of nums, in their order",
           "[x for x in nums if x % 2 == 0]", lambda r: None, lambda r, p: _nums(r, 1, 60, (4, 6)),
           lambda p, x: [v for v in x if v % 2 == 0]),
)


def _inputs(family: Family, p, rng: random.Random, count: int = 4) -> list:
    """`count` distinct inputs (so the example shown is not also a hidden case)."""
    inputs: list = []
    while len(inputs) < count:
        x = family.inputs(rng, p)
        if x not in inputs:
            inputs.append(x)
    return inputs


@register_domain
class ChatCode(PythonTestsDomain):
    name = "chat_code"
    description = "short Python functions asked for in chat; one example shown, hidden unit tests"
    max_new_tokens = 96
    task_file = ""
    make_task = Domain.make_task  # generated from the seed, not rows of a file

    def task_count(self) -> int | None:
        return None

    def rows(self) -> list[dict]:
        return []

    def sample_task(self, rng: random.Random) -> dict:
        family = rng.choice(FAMILIES)
        p = family.param(rng)
        for _ in range(1000):
            inputs = _inputs(family, p, rng)
            outputs = [family.fn(p, x) for x in inputs]
            # not every case passable by a constant or by returning the input (the harness's
            # baselines), or the right function would earn nothing
            if len({repr(y) for y in outputs}) > 1 and any(y != x for x, y in zip(inputs, outputs)):
                break
        else:
            raise RuntimeError(f"chat_code: {family.name} drew no informative tests")
        f = family.name
        tests = [f"assert {f}({x!r}) == {y!r}" for x, y in zip(inputs, outputs)]
        code = f"def {f}({family.arg}):\n    return {family.body.format(p=p)}\n"
        shown = inputs[0]
        prompt = (f"Write a Python function `{f}({family.arg})` that {family.does.format(p=p)}. "
                  f"For example, `{f}({shown!r})` should return `{outputs[0]!r}`. "
                  "Reply with the function in a ```python code block.")
        return {"prompt": prompt, "text": prompt, "code": code, "test_list": tests[:1],
                "hidden_test_list": tests[1:], "test_setup_code": "", "test_imports": [],
                "answer": ""}

    def demonstration(self, task: dict, rng) -> str:
        return f"```python\n{task['code']}```"
