"""FilterTrajectories: one place decides which attempts the trainer must not learn from.

Every attempt keeps its row; a filtered one has `filtered = True` and the first reason that
applies, in this order: it errored (environment or verifier), the verifier suspects an exploit,
it awaits a person's label (`awaiting_review`),
it was cut off at the token limit (only with `filter_truncated`, DAPO's overlong filtering), or
its group carries no learning signal (`zero_variance`, set by NormalizeRewards with
trainer/credit.py `has_signal`: the outcomes tie, and under turn credit the per-turn returns too).
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count


def filter_reason(attempt: Attempt, filter_truncated: bool = False) -> str | None:
    if attempt.verdict == "error":
        return f"{attempt.failure or 'verifier'}_error"
    if attempt.exploit_suspected:
        return "exploit_suspected"
    if attempt.verdict == "pending":  # its reward comes from a review, in a later update
        return "awaiting_review"
    if filter_truncated and attempt.finish_reason == "length":
        return "truncated"
    if attempt.zero_variance:
        return "zero_variance"
    return None


def apply_filters(attempt: Attempt, filter_truncated: bool = False) -> Attempt:
    reason = filter_reason(attempt, filter_truncated)
    if reason:
        count(f"filtered_{reason}")
    return attempt.replace(filtered=reason is not None, filter_reason=reason)


class FilterTrajectories(beam.PTransform):
    def __init__(self, filter_truncated: bool = False):
        super().__init__()
        self.filter_truncated = filter_truncated

    def expand(self, attempts):
        return attempts | "Flag" >> beam.Map(apply_filters, self.filter_truncated)
