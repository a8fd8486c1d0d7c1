"""Verify: the domain's verifier scores each attempt, bounded in time and memory.

Every verification runs in a `BoundedVerifier` worker (flywheel.verifiers.bounded): the Beam DoFn
opens one in setup() and closes it in teardown(); `verify_attempt` callers outside Beam pass
theirs or share this process's. A verification that yields no verdict (deadline, memory cap,
the worker dying, the verifier raising) is blamed by one general rule, not per verifier:

    the same verifier, on the same task, is asked to score a blank response with a blank
    execution (no output, exit 0: what running nothing gives). If it can, what this response
    contains or what its code printed is what broke it: a MODEL failure, scored 0 with verdict
    `fail` (it stays in training as a wrong answer), and an `errors` row of kind `model`. If it
    cannot, the defect is the verifier's or the task's own (an unparsable reference answer): an
    ENVIRONMENT error, verdict `error`, failure `verifier`, which removes the attempt from
    training. The probe never reuses the attempt's execution, output or state: all of those are
    the response's to shape, and a probe that reused them would let a response that breaks the
    verifier through its output alone pass as the environment's fault.

The probe runs only on failures, so a scored response costs one round trip to the worker. A
response that Execute could not make into a program at all (failure `unreadable`) is scored 0,
verdict `fail`, without calling the verifier. An episode whose state showed a hack its answer
cannot (`Attempt.episode_flags`, a shell command writing outside the repository) is scored 0 and
flagged whatever its answer earns.
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.domains.registry import get_domain
from flywheel.sandbox import ExecResult
from flywheel.records.attempt import UNREADABLE, Attempt
from flywheel.transforms.errors import ERRORS_TAG, count, error_row, errors_output, now
from flywheel.verifiers import Verdict, get_verifier
from flywheel.verifiers.bounded import BoundedVerifier, Bounds, Outcome, shared
from flywheel.verifiers.human_review import PENDING

BLANK_RESPONSE = ""


def blank_execution(execution: ExecResult | None) -> ExecResult | None:
    """What running nothing gives, on the attempt's backend: exit 0, no output, no time. None for
    an attempt that ran nothing. Nothing in it comes from the attempt's own run."""
    if execution is None:
        return None
    return ExecResult(exit_code=0, stdout="", stderr="", timed_out=False, truncated=False,
                      kill_reason=None, wall_ms=0.0, cpu_ms=0.0, backend=execution.backend)


def _blame(bounded: BoundedVerifier, verifier, attempt: Attempt, outcome: Outcome) -> str:
    """`model` when the verifier scores a blank response with a blank execution on the same task,
    else `environment`."""
    probe = bounded.run(verifier, attempt.task, BLANK_RESPONSE, blank_execution(attempt.execution))
    return "model" if probe.verdict is not None else "environment"


def awaits_review(task: dict) -> bool:
    """Whether a person, not the domain's verifier, scores this task's attempts: its row says
    `"review": true` (the open_ended domain's always do; a run's [review] domains set it)."""
    return task.get("review") is True


def mark_for_review(task: dict, domains: frozenset[str]) -> dict:
    """`task`, marked to be judged by people when its domain is one of the run's review domains."""
    return {**task, "review": True} if task.get("domain") in domains else task


def flagged(verdict: Verdict, flags: list[str]) -> Verdict:
    """`verdict` with an episode's hacks: reward 0, verdict `fail`, each flag a component."""
    detail = f"exploit suspected: {', '.join(flags)}; {verdict.detail}".strip("; ")
    return Verdict(0.0, "fail", {**verdict.components, **{f"exploit_{f}": 1.0 for f in flags}},
                   True, detail[:1000])


def verify_attempt(attempt: Attempt, bounded: BoundedVerifier | None = None) -> tuple[Attempt, dict | None]:
    """The attempt with its verdict fields, and an `errors` row when verification failed."""
    bounded = bounded or shared()
    verifier = get_verifier(get_domain(attempt.domain).verifier)
    error, failure = None, attempt.failure
    if failure == UNREADABLE:  # Execute could not make a program of it: a wrong answer
        verdict = Verdict(0.0, "fail", {"unreadable_response": 1.0},
                          detail="the response could not be made into a program")
        failure = None
    elif failure:
        verdict = Verdict(0.0, "error", detail=f"{failure} error before verification")
    elif awaits_review(attempt.task):  # a person judges it later (verifiers/human_review.py)
        verifier = get_verifier("human_review")
        verdict = verifier(attempt.task, attempt.response, attempt.execution)
    else:
        outcome = bounded.run(verifier, attempt.task, attempt.response, attempt.execution)
        verdict = outcome.verdict
        if verdict is None:
            kind = _blame(bounded, verifier, attempt, outcome)
            count(outcome.failure)
            error = error_row("verify", kind, outcome.message, attempt.context(),
                              error_type=outcome.failure)
            detail = f"{outcome.failure}: {outcome.message.splitlines()[0] if outcome.message else ''}"
            if kind == "model":
                verdict = Verdict(0.0, "fail", {"verifier_failed": 1.0}, detail=detail)
            else:
                verdict, failure = Verdict(0.0, "error", detail=detail), "verifier"
    if attempt.episode_flags and verdict.verdict != "error":
        verdict = flagged(verdict, attempt.episode_flags)
    if verdict.exploit_suspected:
        count("exploit_suspected")
    count(f"verdict_{verdict.verdict}_{attempt.mode}")
    return attempt.replace(
        reward_source="review_pending" if verdict.verdict == PENDING else "verifier",
        verifier=verifier.name, verifier_version=verifier.version, finished_at=now(),
        failure=failure, reward_raw=float(verdict.reward), verdict=verdict.verdict,
        reward_components=dict(verdict.components), exploit_suspected=verdict.exploit_suspected,
        verdict_detail=verdict.detail), error


class _Verify(beam.DoFn):
    def __init__(self, bounds: Bounds):
        self._bounds = bounds
        self._bounded: BoundedVerifier | None = None

    def setup(self):
        self._bounded = BoundedVerifier(self._bounds)

    def process(self, attempt):
        out, error = verify_attempt(attempt, self._bounded)
        if error is not None:
            yield errors_output(error)
        yield out

    def teardown(self):
        if self._bounded is not None:
            self._bounded.close()


class Verify(beam.PTransform):
    """Attempts in, scored attempts (reward_raw, verdict, reward_components) out, plus errors."""

    def __init__(self, bounds: Bounds = Bounds()):
        super().__init__()
        self._bounds = bounds

    def expand(self, attempts):
        return attempts | "Score" >> beam.ParDo(_Verify(self._bounds)).with_outputs(
            ERRORS_TAG, main="attempts")
