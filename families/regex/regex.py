"""`regex`: write a regular expression from a description and examples: "lowercase letters
followed by digits; matches: ab1, x42; does not match: 7a, ab" -> `[a-z]+\\d+`.

A seed draws a kind (KINDS), its parameters, and strings that must and must not match in full;
the prompt shows some of each, the task keeps as many hidden ones, so listing the shown strings
(`(?:ab1|x42)`) does not pass. Scored by `regex_match` (verifier.py) with the linear-time matcher
(matcher.py); nothing runs in the sandbox.
"""

from __future__ import annotations

import random
import string
from typing import Any

from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain
from flywheel.families.regex.matcher import compile_regex

SHOWN = 4    # positives and negatives each, in the prompt
HIDDEN = 4   # positives and negatives each, only in the task
MAX_STRINGS = 64
MAX_STRING_CHARS = 200
LOWER, DIGITS = string.ascii_lowercase, string.digits


def _word(rng: random.Random, low: int, high: int, letters: str = LOWER) -> str:
    return "".join(rng.choice(letters) for _ in range(rng.randint(low, high)))


def _digits(rng):
    low = rng.randint(1, 3)
    high = low + rng.randint(1, 3)
    pos = lambda: _word(rng, low, high, DIGITS)  # noqa: E731
    neg = lambda: rng.choice([_word(rng, high + 1, high + 3, DIGITS),  # noqa: E731
                              _word(rng, max(0, low - 1), low - 1, DIGITS) if low > 1 else "",
                              _word(rng, low, high, DIGITS + "ab") + "x"])
    return f"strings of {low} to {high} digits", rf"\d{{{low},{high}}}", pos, neg


def _affixes(rng):
    first, last = rng.choice(LOWER), rng.choice(LOWER)
    pos = lambda: first + _word(rng, 0, 5) + last  # noqa: E731
    neg = lambda: rng.choice([rng.choice(LOWER.replace(first, "")) + _word(rng, 0, 5) + last,  # noqa: E731
                              first + _word(rng, 0, 5) + rng.choice(LOWER.replace(last, "")),
                              first + _word(rng, 0, 3) + rng.choice(DIGITS) + last])
    return (f"lowercase words that start with '{first}' and end with '{last}' (two letters or more)",
            f"{first}[a-z]*{last}", pos, neg)


def _letters_digits(rng):
    pos = lambda: _word(rng, 1, 4) + _word(rng, 1, 3, DIGITS)  # noqa: E731
    neg = lambda: rng.choice([_word(rng, 1, 3, DIGITS) + _word(rng, 1, 3),  # noqa: E731
                              _word(rng, 1, 5), _word(rng, 1, 4, DIGITS),
                              _word(rng, 1, 3) + _word(rng, 1, 2, DIGITS) + _word(rng, 1, 2)])
    return "one or more lowercase letters followed by one or more digits", r"[a-z]+\d+", pos, neg


def _hyphenated(rng):
    pos = lambda: "-".join(_word(rng, 1, 4) for _ in range(rng.randint(1, 3)))  # noqa: E731
    neg = lambda: rng.choice(["-" + _word(rng, 1, 4), _word(rng, 1, 4) + "-",  # noqa: E731
                              _word(rng, 1, 3) + "--" + _word(rng, 1, 3),
                              _word(rng, 1, 3) + rng.choice(DIGITS + "_ ") + _word(rng, 1, 3)])
    return "lowercase words joined by single hyphens", r"[a-z]+(?:-[a-z]+)*", pos, neg


def _repeated(rng):
    unit = _word(rng, 2, 2)
    while unit[0] == unit[1]:
        unit = _word(rng, 2, 2)
    pos = lambda: unit * rng.randint(1, 12)  # noqa: E731
    neg = lambda: rng.choice([unit * rng.randint(1, 4) + unit[0], unit[1] + unit * rng.randint(1, 3),  # noqa: E731
                              "", unit[::-1] * rng.randint(1, 3)])
    return f"one or more repetitions of '{unit}'", f"(?:{unit})+", pos, neg


KINDS = (_digits, _affixes, _letters_digits, _hyphenated, _repeated)


def _distinct(draw, keep, count: int) -> list[str]:
    found: list[str] = []
    for _ in range(200):
        text = draw()
        if text not in found and keep(text):
            found.append(text)
            if len(found) == count:
                break
    return found


@register_domain
class RegexDomain(Domain):
    name = "regex"
    verifier = "regex_match"
    description = "a description and examples -> a regular expression matching them in full"
    max_new_tokens = 40
    tier = 2
    required_fields = ("task_id", "prompt", "answer", "positives", "negatives")

    def sample_task(self, rng: random.Random) -> dict[str, Any]:
        what, answer, pos, neg = rng.choice(KINDS)(rng)
        reference = compile_regex(answer)
        positives = _distinct(pos, reference.fullmatch, SHOWN + HIDDEN)
        negatives = _distinct(neg, lambda t: not reference.fullmatch(t), SHOWN + HIDDEN)
        shown = lambda xs: ", ".join(repr(x) for x in xs[:SHOWN])  # noqa: E731
        prompt = (f"Write a regular expression for {what}; it must match each whole string.\n"
                  f"Matches: {shown(positives)}\nDoes not match: {shown(negatives)}\nRegex:")
        return {"prompt": prompt, "answer": answer, "positives": positives, "negatives": negatives}

    def demonstration(self, task: dict[str, Any], rng: random.Random) -> str:
        return task["answer"]

    def validate_task(self, task: dict[str, Any]) -> list[str]:
        problems = super().validate_task(task)
        for name in ("positives", "negatives"):
            value = task.get(name)
            if value is None:
                continue
            if not (isinstance(value, list) and 0 < len(value) <= MAX_STRINGS
                    and all(isinstance(v, str) and len(v) <= MAX_STRING_CHARS for v in value)):
                problems.append(f"field `{name}` must be a list of 1 to {MAX_STRINGS} strings of at most "
                                f"{MAX_STRING_CHARS} characters")
        return problems
