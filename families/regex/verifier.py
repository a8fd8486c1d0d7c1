"""The `regex_match` verifier: the response's regular expression must match every positive string
of the task in full and no negative one, hidden ones included. Patterns are compiled and run by
the linear-time matcher (matcher.py), so a hostile pattern costs what its size allows and no more;
one it cannot read (backreferences, lookarounds, over its size caps) earns nothing."""

from __future__ import annotations

from typing import Any

from flywheel.families.regex.matcher import RegexError, compile_regex
from flywheel.verifiers.registry import Verdict, register_verifier


def regex_of(response: str) -> str:
    """The pattern a response gives: its fenced block's or its own text, stripped, without one
    pair of surrounding backticks or slashes."""
    text = response.strip()
    if text.startswith("```"):
        text = text[3:].split("\n", 1)[-1] if "\n" in text else text[3:]
        text = text.rsplit("```", 1)[0].strip()
    for mark in ("`", "/"):
        if len(text) >= 2 and text[0] == mark and text[-1] == mark:
            text = text[1:-1]
    return text


@register_verifier("regex_match", "1")
def regex_match(task: dict, response: str, execution: Any = None) -> Verdict:
    pattern = regex_of(response)
    if not pattern or "\n" in pattern:
        return Verdict(0.0, "fail", {"correct": 0.0}, detail="no single-line pattern")
    try:
        regex = compile_regex(pattern)
        hits = [regex.fullmatch(t) for t in task["positives"]]
        misses = [not regex.fullmatch(t) for t in task["negatives"]]
    except RegexError as e:
        return Verdict(0.0, "fail", {"correct": 0.0}, detail=f"unreadable pattern: {e}"[:300])
    ok = all(hits) and all(misses)
    return Verdict(1.0 if ok else 0.0, "pass" if ok else "fail",
                   {"correct": float(ok), "positives": sum(hits) / len(hits),
                    "negatives": sum(misses) / len(misses)})
