"""NormalizeRewards: each group's rewards become advantages, as the run's `[algorithm]` says.

The arithmetic is trainer/credit.py's, the one place advantages are computed: the group estimator
(grpo, dr_grpo, rloo) over the outcomes sets each attempt's `advantage`, the per-turn estimator
(outcome, turn) sets each episode turn's `turns[].advantage`, the advantage its action's tokens
are trained with. Attempts that errored or are suspected of an exploit are left out of their
group's statistics (advantage 0). A group none of whose attempts carries signal (`has_signal`:
all outcomes equal, and under turn credit all per-turn returns too) is marked `zero_variance`
for FilterTrajectories, and the trainer, by the same rule, skips the same rows.
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.credit import assign_credit, has_signal
from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count


def normalize_group(attempts: list[Attempt], algorithm: Algorithm = Algorithm()) -> list[Attempt]:
    """Set `advantage` (and episode turns' advantages) on one group's attempts, and
    `zero_variance` on them when the group carries no signal."""
    # errors, exploits and attempts awaiting a person's label carry no reward to compare yet
    valid = lambda a: a.verdict not in ("error", "pending") and not a.exploit_suspected  # noqa: E731
    scored = [a for a in attempts if valid(a)]
    out = [a.replace(advantage=0.0) for a in attempts if not valid(a)]
    if not scored:
        return out
    advantages, turn_advantages = assign_credit(
        [a.reward_raw for a in scored], [turn_scores(a) for a in scored],
        algorithm.advantage, algorithm.credit, algorithm.discount)
    scored = [a.replace(advantage=float(adv), turns=with_advantages(a.turns, turns))
              for a, adv, turns in zip(scored, advantages, turn_advantages)]
    if not any(has_signal(a.row(), algorithm.credit) for a in scored):
        count("groups_zero_variance")
        return out + [a.replace(zero_variance=True) for a in scored]
    count("groups_with_signal")
    return out + scored


def turn_scores(attempt: Attempt) -> list[float | None] | None:
    """The domain's score of the state after each turn of an episode (None: the turn scored
    nothing), or None for an attempt that is no episode."""
    if attempt.episode_end is None or not attempt.turns:
        return None
    return [t.get("reward") for t in attempt.turns]


def with_advantages(turns: list[dict], advantages) -> list[dict]:
    if advantages is None:
        return turns
    return [{**t, "advantage": float(a)} for t, a in zip(turns, advantages)]


class NormalizeRewards(beam.PTransform):
    def __init__(self, algorithm: Algorithm = Algorithm()):
        super().__init__()
        self.algorithm = algorithm.check()  # fail at construction on an unknown name

    def expand(self, attempts):
        return (attempts
                | "ByGroup" >> beam.Map(lambda a: (a.group_id, a))
                | "Group" >> beam.GroupByKey()
                | "Advantage" >> beam.FlatMap(
                    lambda kv, algorithm: normalize_group(
                        sorted(kv[1], key=lambda a: a.sample_index), algorithm),
                    self.algorithm))
