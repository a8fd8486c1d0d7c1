"""NormalizeRewards: group-relative advantages over the N attempts of each task.

The estimator comes from the trainer's registry (ADVANTAGES: grpo, dr_grpo, rloo, ...).
Attempts that errored are left out of their group's statistics; groups whose rewards are all
equal carry no learning signal and are marked `zero_variance` (advantage 0) for
FilterTrajectories.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from flywheel.trainer.advantages import ADVANTAGES
from flywheel.transforms.attempt import Attempt
from flywheel.transforms.errors import count


def normalize_group(attempts: list[Attempt], estimator: str, turn_discount: float = 1.0
                    ) -> list[Attempt]:
    """Set `advantage` on one group's attempts, and `zero_variance` when the group has no signal.

    Errored and exploit-suspected attempts are left out of the group's statistics (advantage 0).
    """
    valid = lambda a: a.verdict != "error" and not a.exploit_suspected  # noqa: E731
    scored = [a for a in attempts if valid(a)]
    out = [a.replace(advantage=0.0) for a in attempts if not valid(a)]
    if not scored:
        return out
    scored = turn_advantages(scored, turn_discount)  # turns may differ where outcomes do not
    rewards = np.array([a.reward_raw for a in scored], dtype=np.float64)
    if len(scored) < 2 or np.all(rewards == rewards[0]):
        count("groups_zero_variance")
        return out + [a.replace(advantage=0.0, zero_variance=True) for a in scored]
    count("groups_with_signal")
    advantages = ADVANTAGES.get(estimator)(rewards)
    return out + [a.replace(advantage=float(adv)) for a, adv in zip(scored, advantages)]


def turn_returns(attempt: Attempt, discount: float) -> list[float]:
    """Discounted return of each turn of an episode: its own reward (the domain's score of the
    state after it, 0 when none), the later turns' discounted, and the outcome at the last.

    A turn's reward never exceeds the episode's verified outcome: visible tests passed by code
    that fails the hidden ones (hard-coded examples) earn nothing a turn at a time either."""
    outcome = float(attempt.reward_raw)
    rewards = [min(float(t.get("reward") or 0.0), outcome) for t in attempt.turns]
    rewards[-1] += outcome
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + discount * running
        returns.append(running)
    return returns[::-1]


def turn_advantages(attempts: list[Attempt], discount: float) -> list[Attempt]:
    """Per-turn credit: each episode turn's return, normalized over all turns of the group's
    episodes, as `turns[].advantage` (the trainer uses it with --credit turn)."""
    episodes = [a for a in attempts if a.episode_end is not None and a.turns]
    if not episodes:
        return attempts
    returns = {id(a): turn_returns(a, discount) for a in episodes}
    pooled = np.array([g for a in episodes for g in returns[id(a)]])
    mean, std = pooled.mean(), pooled.std()
    def with_advantages(a):
        if id(a) not in returns:
            return a
        return a.replace(turns=[{**t, "advantage": float((g - mean) / std) if std > 0 else 0.0}
                                for t, g in zip(a.turns, returns[id(a)])])
    return [with_advantages(a) for a in attempts]


class NormalizeRewards(beam.PTransform):
    def __init__(self, estimator: str = "grpo", turn_discount: float = 1.0):
        super().__init__()
        ADVANTAGES.get(estimator)  # fail at construction on an unknown name
        self.estimator, self.turn_discount = estimator, turn_discount

    def expand(self, attempts):
        return (attempts
                | "ByGroup" >> beam.Map(lambda a: (a.group_id, a))
                | "Group" >> beam.GroupByKey()
                | "Advantage" >> beam.FlatMap(
                    lambda kv, est, gamma: normalize_group(
                        sorted(kv[1], key=lambda a: a.sample_index), est, gamma),
                    self.estimator, self.turn_discount))
