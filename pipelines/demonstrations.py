"""Demonstrations as token ids: what the warm start and `flywheel sft --domain` train on.

A single-turn domain's demonstration is one response; a multi-turn domain's is a whole episode,
its actions and the observations between them as the rollout appends them, of which only the
actions are trained on. Here, beside the plain rollout, so that the loop's warm start and the
feedback side's SFT data both read it without importing each other.
"""

from __future__ import annotations

from flywheel.domains.episodes import TurnLimits, turns_for
from flywheel.transforms.turn import observation_ids


def demonstrated(policy, domain, task: dict, rng,
                 run_max_turns: int | TurnLimits) -> tuple[list[int], list[int]]:
    """(ids, loss mask) of a demonstration: one response, or for a multi-turn domain a whole
    episode (actions and the observations between them, as the rollout appends them; only the
    actions are trained on)."""
    if turns_for(domain, run_max_turns) == 1:
        ids = policy.encode_response(domain.demonstration(task, rng))
        return ids, [1] * len(ids)
    ids, mask = [], []
    for action, observation in domain.demonstration_turns(task, rng):
        action_ids = policy.encode_response(action)
        seen = observation_ids(policy, observation) if observation is not None else []
        ids += action_ids + seen
        mask += [1] * len(action_ids) + [0] * len(seen)
    return ids, mask
