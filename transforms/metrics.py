"""Per-iteration metrics rows (iteration x domain x name -> value) computed inside the pipeline.

Each metric is a mean over attempts, per domain and over all domains (domain = '*').
`zero_variance_frac` is the share of attempts in groups without learning signal, by the one rule
the trainer skips rows with (trainer/credit.py `has_signal`, through FilterTrajectories).
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import now


def train_values(a: Attempt) -> list[tuple[str, float]]:
    return [("train_pass_rate", float(a.verdict == "pass")),
            ("train_mean_reward", float(a.reward_raw)),
            ("zero_variance_frac", float(a.filter_reason == "zero_variance")),
            ("response_tokens", float(len(a.response_token_ids))), *episode_values(a, "")]


def heldout_values(a: Attempt) -> list[tuple[str, float]]:
    return [("heldout_pass@1", float(a.verdict == "pass")), *episode_values(a, "heldout_")]


def episode_values(a: Attempt, prefix: str) -> list[tuple[str, float]]:
    """Multi-turn episodes only: turns taken, the share of well-formed tool calls, solved-or-submitted."""
    if a.episode_end is None or not a.turns:
        return []
    wellformed = sum(t.get("tool_error") is None for t in a.turns) / len(a.turns)
    return [(f"{prefix}episode_turns", float(len(a.turns))),
            (f"{prefix}tool_calls_wellformed", wellformed),
            (f"{prefix}episode_finished", float(a.episode_end in ("solved", "submitted")))]


class ComputeMetrics(beam.PTransform):
    """Scored attempts in, `metrics` rows out; `values` maps an attempt to (name, value) pairs."""

    def __init__(self, values, *, run_id: str, iteration: int, policy_version: int):
        super().__init__()
        self.values, self.run_id = values, run_id
        self.iteration, self.policy_version = iteration, policy_version

    def _explode(self, attempt):
        for name, value in self.values(attempt):
            yield (attempt.domain, name), value
            yield ("*", name), value

    def _row(self, kv):
        (domain, name), value = kv
        return {"run_id": self.run_id, "iteration": self.iteration, "domain": domain,
                "name": name, "value": float(value), "policy_version": self.policy_version,
                "created_at": now()}

    def expand(self, attempts):
        return (attempts
                | "Values" >> beam.FlatMap(self._explode)
                | "Mean" >> beam.CombinePerKey(beam.combiners.MeanCombineFn())
                | "Row" >> beam.Map(self._row))
