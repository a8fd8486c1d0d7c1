"""What a long episode sees once its context is full: context strategies, chosen per run (--context).

- `full`: everything, up to the token budget; then the episode ends (episode_end `budget`).
- `cut`: the observations of all but the last `keep_turns` turns become a marker.
- `anchored`: the problem statement, the domain's anchor (a repository episode's current diff),
  then only the last `keep_turns` turns (OpenHands' condensers, SWE-agent's history processors).

Token accounting stays exact. A rebuilt context is a new *segment*: the episode's ids so far close
as a segment of their own (`Attempt.segments`: its prompt and response ids, log-probabilities and
mask, as sampled), and the next turn continues from the rebuilt ids as a new prompt. Earlier
actions enter it as the very ids the policy sampled (never re-tokenized text: the drift of
verl #3960 cannot happen), observations through the policy's `encode_observation`. The trainer
trains each segment on exactly the ids the policy saw (trainer/segments.py). Each rebuild counts
in the Beam counter `context_rebuilds_<strategy>`. A strategy that
cannot fit the next action even after rebuilding returns None, and the episode ends on budget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import apache_beam as beam

from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import cut_output
from flywheel.records.attempt import Attempt
from flywheel.registry import Registry

if TYPE_CHECKING:
    from flywheel.trainer.policy import Policy

CUT_MARKER = "[observation cut]"
OMITTED = "[{n} earlier turns omitted]"
ANCHOR_CHARS = 4000

Strategy = Callable[["Policy", Attempt, int], "list[int] | None"]
CONTEXTS: Registry[Strategy] = Registry("context strategy", home="flywheel.transforms.context_strategies")


def first_prompt(attempt: Attempt) -> list[int]:
    """The episode's first prompt ids (its first segment's)."""
    return list(attempt.segments[0]["prompt_token_ids"] if attempt.segments else attempt.prompt_token_ids)


def action_ids(attempt: Attempt, turn: dict) -> list[int]:
    """The ids the policy sampled for `turn`, from the segment that holds them."""
    k = turn.get("segment") or 0
    response = (attempt.segments[k]["response_token_ids"] if k < len(attempt.segments)
                else attempt.response_token_ids)
    return list(response[turn["action_start"]:turn["action_end"]])


def turn_ids(policy: Policy, attempt: Attempt, turns: list[dict], cut: int = 0) -> list[int]:
    """`turns` as the policy reads them: each action's sampled ids, then its observation's ids
    (the first `cut` observations as CUT_MARKER)."""
    ids, marker = [], policy.encode_observation(CUT_MARKER)
    for n, turn in enumerate(turns):
        ids += action_ids(attempt, turn)
        whole = policy.encode_observation(turn.get("observation") or "")
        ids += marker if n < cut and len(marker) < len(whole) else whole  # never longer for a cut
    return ids


@CONTEXTS.register("full")
def full(policy: Policy, attempt: Attempt, most: int) -> list[int] | None:
    return None  # never rebuilt: the budget ends the episode


@CONTEXTS.register("cut")
def cut(policy: Policy, attempt: Attempt, most: int) -> list[int] | None:
    """The first prompt and every action; the observations of all but the last keep_turns turns cut."""
    turns, keep = attempt.turns, attempt.episode.keep_turns
    for kept in range(min(keep, len(turns)), -1, -1):
        ids = first_prompt(attempt) + turn_ids(policy, attempt, turns, cut=len(turns) - kept)
        if len(ids) <= most:
            return ids
    return None


@CONTEXTS.register("anchored")
def anchored(policy: Policy, attempt: Attempt, most: int) -> list[int] | None:
    """The first prompt, the domain's anchor, a marker, and the last keep_turns turns whole."""
    domain = get_domain(attempt.domain)
    anchor = cut_output(domain.context_anchor(attempt.task, attempt.episode.state), ANCHOR_CHARS)[0]
    turns = attempt.turns
    for kept in range(min(attempt.episode.keep_turns, len(turns)), 0, -1):
        head = OMITTED.format(n=len(turns) - kept) + ("\n" + anchor if anchor else "")
        ids = (first_prompt(attempt) + policy.encode_observation(head)
               + turn_ids(policy, attempt, turns[len(turns) - kept:]))
        if len(ids) <= most:
            return ids
    return None


def new_segment(attempt: Attempt, prompt: list[int], strategy: str) -> dict:
    """The token fields of an episode that continues from `prompt` as a new segment: its ids so
    far closed as a segment, the last observation read in the new prompt (not in any response)."""
    turns = [dict(t) for t in attempt.turns]
    first = next(n for n, t in enumerate(turns) if (t.get("segment") or 0) == len(attempt.segments))
    closed = {"prompt_token_ids": list(attempt.prompt_token_ids),
              "response_token_ids": list(attempt.response_token_ids),
              "response_logprobs": list(attempt.response_logprobs),
              "response_mask": list(attempt.response_mask or []),
              "first_turn": first, "context": strategy}
    turns[-1].update(observation_start=None, observation_end=None)
    beam.metrics.Metrics.counter("flywheel", f"context_rebuilds_{strategy}").inc()
    return {"prompt_token_ids": prompt, "response_token_ids": [], "response_logprobs": [],
            "response_mask": [], "turns": turns, "segments": [*attempt.segments, closed]}
