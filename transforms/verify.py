"""Verify: the domain's verifier scores each attempt; a verifier that raises is an error row."""

from __future__ import annotations

import apache_beam as beam

from flywheel.domains.registry import get_domain
from flywheel.transforms.attempt import Attempt
from flywheel.transforms.errors import ERRORS_TAG, count, error_row, errors_output, now
from flywheel.verifiers import Verdict, get_verifier


def verify_attempt(attempt: Attempt) -> tuple[Attempt, dict | None]:
    """The attempt with its verdict fields, and an `errors` row when verification failed."""
    verifier = get_verifier(get_domain(attempt.domain).verifier)
    error, failure = None, attempt.failure
    if failure:
        verdict = Verdict(0.0, "error", detail=f"{failure} error before verification")
    else:
        try:
            verdict = verifier(attempt.task, attempt.response, attempt.execution)
        except Exception as e:
            error = error_row("verify", "environment", e, attempt.context())
            verdict, failure = Verdict(0.0, "error", detail=str(e)), "verifier"
    if verdict.exploit_suspected:
        count("exploit_suspected")
    count(f"verdict_{verdict.verdict}_{attempt.mode}")
    return attempt.replace(
        verifier=verifier.name, verifier_version=verifier.version, finished_at=now(),
        failure=failure, reward_raw=float(verdict.reward), verdict=verdict.verdict,
        reward_components=dict(verdict.components), exploit_suspected=verdict.exploit_suspected,
        verdict_detail=verdict.detail), error


class _Verify(beam.DoFn):
    def process(self, attempt):
        out, error = verify_attempt(attempt)
        if error is not None:
            yield errors_output(error)
        yield out


class Verify(beam.PTransform):
    """Attempts in, scored attempts (reward_raw, verdict, reward_components) out, plus errors."""

    def expand(self, attempts):
        return attempts | "Score" >> beam.ParDo(_Verify()).with_outputs(ERRORS_TAG, main="attempts")
