"""Expand: one element per attempt, each carrying its own sampling seed and group id."""

from __future__ import annotations

import hashlib

import apache_beam as beam

from flywheel.domains.registry import get_domain
from flywheel.records.attempt import Attempt
from flywheel.transforms.errors import count


def attempt_seed(seed: int, iteration: int, task_id: str, sample_index: int, mode: str) -> int:
    """A 63-bit sampling seed that depends only on the attempt's identity, not on batching."""
    digest = hashlib.sha256(f"{seed}:{iteration}:{mode}:{task_id}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def expand_task(task: dict, *, run_id: str, iteration: int, policy_version: int, seed: int,
                n_samples: int, temperature: float, mode: str) -> list[Attempt]:
    """The `n_samples` attempts at one task (times its `group_scale`, a steered run's way to
    sample a small domain's few tasks more: transforms/sample_by_budget.py)."""
    domain = get_domain(task["domain"])
    if "group_scale" in task:
        n_samples *= int(task["group_scale"])
        task = {k: v for k, v in task.items() if k != "group_scale"}
    return [Attempt(
        run_id=run_id, iteration=iteration, policy_version=policy_version, mode=mode,
        domain=task["domain"], task_id=task["task_id"],
        group_id=f"{iteration}/{mode}/{task['task_id']}", sample_index=k,
        prompt=task["prompt"], task=task, sampling_temperature=temperature,
        max_new_tokens=int(task.get("max_new_tokens") or domain.max_new_tokens),
        seed=attempt_seed(seed, iteration, task["task_id"], k, mode),
    ) for k in range(n_samples)]


class Expand(beam.PTransform):
    """Fan each task out to `n_samples` attempts at `temperature` (greedy when 0)."""

    def __init__(self, *, run_id: str, iteration: int, policy_version: int, seed: int,
                 n_samples: int, temperature: float, mode: str):
        super().__init__()
        self.run_id, self.iteration, self.policy_version = run_id, iteration, policy_version
        self.seed, self.n_samples, self.temperature, self.mode = seed, n_samples, temperature, mode

    def _attempts(self, task: dict):
        for attempt in expand_task(task, run_id=self.run_id, iteration=self.iteration,
                                   policy_version=self.policy_version, seed=self.seed,
                                   n_samples=self.n_samples, temperature=self.temperature,
                                   mode=self.mode):
            count(f"attempts_{self.mode}")
            yield attempt

    def expand(self, tasks):
        return tasks | "Attempts" >> beam.FlatMap(self._attempts)
