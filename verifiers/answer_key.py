"""`answer_key`: not a scorer. A response's canonical final answer (`Domain.answer_key`) for
majority voting (maj@N in `flywheel eval`), computed like any verification: in the bounded worker,
since reading an answer out of model text is parsing hostile input (a math answer can be built to
make a parser hang). The key travels in the verdict's `detail`; `has_key` says whether there is one.
"""

from __future__ import annotations

from typing import Any

from flywheel.domains.registry import get_domain
from flywheel.verifiers import Verdict, register_verifier


@register_verifier("answer_key", "1")
def answer_key(task: dict, response: str, execution: Any = None) -> Verdict:
    key = get_domain(task["domain"]).answer_key(task, response)
    return Verdict(0.0, "pass", {"has_key": float(key is not None)}, False, key or "")


def key_of(verdict: Verdict | None) -> str | None:
    """The answer key an `answer_key` verdict carries; None for none (or no verdict: out of time)."""
    if verdict is None or not verdict.components.get("has_key"):
        return None
    return verdict.detail
