"""`human_review`: no program can judge these responses; a person does, later.

The attempt is held as `pending` (reward 0, filtered `awaiting_review`, reward_source
`review_pending`): nothing trains on it until a label arrives in the run's `reviews` table, and
then the label is its reward in a later update (feedback/review_rewards.py). A response that
nobody has judged earns nothing."""

from __future__ import annotations

from typing import Any

from flywheel.verifiers.registry import Verdict, register_verifier

PENDING = "pending"


@register_verifier("human_review", "1")
def human_review(task: dict, response: str, execution: Any = None) -> Verdict:
    return Verdict(0.0, PENDING, {}, detail="awaiting a reviewer's label")
