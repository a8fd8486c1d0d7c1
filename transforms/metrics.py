"""Per-iteration metrics rows (iteration x domain x name -> value) computed inside the pipeline.

Each metric is a mean over attempts, per domain and over all domains (domain = '*').
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.transforms.attempt import Attempt
from flywheel.transforms.errors import now


def train_values(a: Attempt) -> list[tuple[str, float]]:
    return [("train_pass_rate", float(a.verdict == "pass")),
            ("train_mean_reward", float(a.reward_raw)),
            ("zero_variance_frac", float(a.filter_reason == "zero_variance")),
            ("response_tokens", float(len(a.response_token_ids)))]


def heldout_values(a: Attempt) -> list[tuple[str, float]]:
    return [("heldout_pass@1", float(a.verdict == "pass"))]


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
