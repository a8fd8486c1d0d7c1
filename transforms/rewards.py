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


def normalize_group(attempts: list[Attempt], estimator: str) -> list[Attempt]:
    """Set `advantage` on one group's attempts, and `zero_variance` when the group has no signal.

    Errored and exploit-suspected attempts are left out of the group's statistics (advantage 0).
    """
    valid = lambda a: a.verdict != "error" and not a.exploit_suspected  # noqa: E731
    scored = [a for a in attempts if valid(a)]
    out = [a.replace(advantage=0.0) for a in attempts if not valid(a)]
    if not scored:
        return out
    rewards = np.array([a.reward_raw for a in scored], dtype=np.float64)
    if len(scored) < 2 or np.all(rewards == rewards[0]):
        count("groups_zero_variance")
        return out + [a.replace(advantage=0.0, zero_variance=True) for a in scored]
    count("groups_with_signal")
    advantages = ADVANTAGES.get(estimator)(rewards)
    return out + [a.replace(advantage=float(adv)) for a, adv in zip(scored, advantages)]


class NormalizeRewards(beam.PTransform):
    def __init__(self, estimator: str = "grpo"):
        super().__init__()
        ADVANTAGES.get(estimator)  # fail at construction on an unknown name
        self.estimator = estimator

    def expand(self, attempts):
        return (attempts
                | "ByGroup" >> beam.Map(lambda a: (a.group_id, a))
                | "Group" >> beam.GroupByKey()
                | "Advantage" >> beam.FlatMap(
                    lambda kv, est: normalize_group(sorted(kv[1], key=lambda a: a.sample_index), est),
                    self.estimator))
