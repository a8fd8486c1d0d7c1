"""The `format_rules` verifier: a response checked against the format rules its task lists.

A task's `rules` is a list of dicts, each a rule name and its parameters, e.g.
    [{"rule": "word_count", "n": 7}, {"rule": "contains", "words": ["river"]}]
Every rule is a small program over the text; the reward is 1 when all of them hold, else 0
(one component per rule says which held). Rules are data, so a user's task file may list them
too. Each rule that could be met by saying nothing is paired, in the built-in tasks, with one
that needs content (`contains`, distinct items, non-empty values).
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from flywheel.verifiers.registry import Verdict, register_verifier
from flywheel.domains.json_answer import parse_json

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’-][A-Za-z0-9]+)*")


def words(text: str) -> list[str]:
    """The words of `text`: letters and digits, with inner apostrophes or hyphens (don't, well-known)."""
    return _WORD.findall(text)


def word_count(text: str, n: int) -> bool:
    """Exactly `n` words."""
    return len(words(text)) == int(n)


def max_words(text: str, n: int) -> bool:
    """At least one word and at most `n`."""
    return 0 < len(words(text)) <= int(n)


def one_of(text: str, options: list[str]) -> bool:
    """The whole reply is one of `options` (any case; a final period or "!" allowed)."""
    return text.strip().rstrip(".!").strip().lower() in {o.lower() for o in options}


def contains(text: str, words: list[str]) -> bool:
    """Each of `words` appears as a whole word, in any case."""
    have = {w.lower() for w in _WORD.findall(text)}
    return all(w.lower() in have for w in words)


def json_keys(text: str, keys: list[str]) -> bool:
    """A JSON object (alone, or in a ```json block) with exactly `keys`, each a non-empty string."""
    value, _ = parse_json(text)
    return (isinstance(value, dict) and sorted(value) == sorted(keys)
            and all(isinstance(v, str) and v.strip() for v in value.values()))


def bullet_lines(text: str, n: int, prefix: str = "- ") -> bool:
    """Exactly `n` non-empty lines, each `prefix` then an item; the items distinct and non-empty."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    items = [line[len(prefix.strip()):].strip().lower() for line in lines]
    return (len(lines) == int(n) and all(line.startswith(prefix.strip()) for line in lines)
            and all(items) and len(set(items)) == len(items))


def lowercase(text: str) -> bool:
    """Letters, and none of them upper case."""
    return any(c.isalpha() for c in text) and not any(c.isupper() for c in text)


def repeated(text: str, word: str, n: int, sep: str = ", ") -> bool:
    """`word` exactly `n` times joined by `sep`, nothing else (surrounding whitespace aside)."""
    return text.strip() == sep.join([word] * int(n))


RULES: dict[str, Callable[..., bool]] = {
    "word_count": word_count, "max_words": max_words, "one_of": one_of, "contains": contains, "json_keys": json_keys,
    "bullet_lines": bullet_lines, "lowercase": lowercase, "repeated": repeated,
}


def check(rule: dict, text: str) -> bool:
    """Whether `text` keeps `rule`; ValueError naming the known rules for an unknown one."""
    params = {k: v for k, v in rule.items() if k != "rule"}
    fn = RULES.get(rule.get("rule"))
    if fn is None:
        raise ValueError(f"unknown format rule {rule.get('rule')!r}; known: {', '.join(RULES)}")
    return fn(text, **params)


@register_verifier("format_rules", "1")
def format_rules(task: dict, response: str, execution: Any = None) -> Verdict:
    rules = task["rules"]
    if isinstance(rules, str):  # a task file may hold them as JSON text
        rules = json.loads(rules)
    if not rules:
        raise ValueError(f"task {task.get('task_id')}: no format rules")
    held = {f"{i}_{r['rule']}": float(check(r, response)) for i, r in enumerate(rules)}
    ok = all(held.values())
    broken = [name for name, v in held.items() if not v]
    return Verdict(float(ok), "pass" if ok else "fail", {**held, "correct": float(ok)},
                   detail="" if ok else f"broken: {', '.join(broken)}")
