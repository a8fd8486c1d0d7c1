"""SampleByBudget: an iteration's training tasks chosen from its candidates, by budget and sampler.

    candidates -> per domain: classify (sampler, history) -> quotas (budget over the domains
    present) -> select (steering/samplers.py) -> the chosen tasks, and `steer/*` metrics rows

Candidates are the tasks ReadTasks produced: a generated domain's fresh window and the earlier
tasks the driver asked to revisit, a task file's every training task. Only (domain, task id)
pairs travel to the per-domain selection; the tasks themselves are joined back by id, so a large
task (a repository snapshot) is never grouped. The quotas are computed from the domains present,
so a domain known only from a task file gets its share like a built-in one, and within what each
has: the share a small domain cannot use goes to the others (budgets.quotas_within).

With `fill_repeats` R > 1 a domain whose share is more than its tasks can hold is filled by
sampling its tasks more: each of them gets a group up to R times the run's n_samples (the task
carries `group_scale`, which Expand reads), so ten times fewer tasks no longer mean ten times
fewer attempts. R = 1 (the default) leaves every group at n_samples.
"""

from __future__ import annotations

import apache_beam as beam

from flywheel.steering.budgets import Budget, quotas_within
from flywheel.steering.history import TaskStats
from flywheel.steering.samplers import SAMPLERS, Policy, select
from flywheel.transforms.errors import count, now


class SampleByBudget(beam.PTransform):
    """Tasks in, the chosen tasks out (main output) plus `metrics` rows (tag "metrics").

    `attempts`: training attempts of the iteration (0: `tasks_per_domain` x `n_samples` per
    domain present); `history`: task id -> TaskStats of the candidates seen before; `exclude`:
    task ids that are no candidates (a top-up's: those the iteration has trained on already)."""

    def __init__(self, *, sampler: str, policy: Policy, budget: Budget, attempts: int,
                 tasks_per_domain: int, n_samples: int, seed: int, history: dict[str, TaskStats],
                 run_id: str, iteration: int, policy_version: int,
                 exclude: frozenset[str] = frozenset(), at_least_one: bool = True,
                 fill_repeats: int = 1):
        super().__init__()
        SAMPLERS.get(sampler)  # fail at construction on an unknown name
        self.sampler, self.policy, self.budget = sampler, policy, budget
        self.attempts, self.tasks_per_domain, self.n_samples = attempts, tasks_per_domain, n_samples
        self.seed, self.history = seed, {k: v.to_tuple() for k, v in history.items()}
        self.exclude, self.at_least_one = frozenset(exclude), at_least_one
        self.fill_repeats = max(1, int(fill_repeats))
        self.ids = dict(run_id=run_id, iteration=iteration, policy_version=policy_version)

    def domain_quotas(self, capacity: dict[str, int]) -> dict[str, int]:
        """Each domain's task slots (groups of n_samples), given the candidates each domain
        present has: at most its candidates x fill_repeats."""
        tasks = (self.attempts // max(1, self.n_samples) if self.attempts
                 else self.tasks_per_domain * len(capacity))
        slots = {d: c * self.fill_repeats for d, c in capacity.items()}
        return quotas_within(self.budget.shares(capacity), tasks, slots, self.at_least_one)

    @staticmethod
    def group_scales(quota: int, chosen: int) -> list[int]:
        """Each chosen task's multiple of n_samples, in selection order: 1 while the quota fits
        the tasks, else the quota spread over them, the first ones taking one more so the
        scales add up to the quota exactly."""
        if chosen <= 0 or quota <= chosen:
            return [1] * max(chosen, 0)
        base, extra = divmod(quota, chosen)
        return [base + (i < extra) for i in range(chosen)]

    def _select(self, kv, capacity, history):
        domain, task_ids = kv
        shares = self.budget.shares(capacity)
        quota = self.domain_quotas(capacity).get(domain, 0)
        sampler = SAMPLERS.get(self.sampler)()
        candidates = [sampler.classify(t, TaskStats(*history[t]) if t in history else None,
                                       self.policy) for t in sorted(set(task_ids))]
        tasks = min(quota, len(candidates))
        chosen = select(candidates, tasks, sampler.class_quotas(tasks, self.policy),
                        self.seed, self.ids["iteration"])
        scales = self.group_scales(quota, len(chosen))
        count("steer_selected", len(chosen))
        for c, scale in zip(chosen, scales):
            yield (domain, c.task_id), scale
        figures = {"steer/planned_share": shares.get(domain, 0.0), "steer/quota": quota,
                   "steer/candidates": len(candidates), "steer/selected": len(chosen),
                   "steer/shortfall": max(0, quota - sum(scales))}
        if self.fill_repeats > 1:
            figures["steer/group_scale"] = sum(scales) / len(scales) if scales else 0.0
        for klass in sorted({c.klass for c in candidates}):
            figures[f"steer/candidates_{klass}"] = sum(c.klass == klass for c in candidates)
            figures[f"steer/selected_{klass}"] = sum(c.klass == klass for c in chosen)
        for name, value in figures.items():
            yield beam.pvalue.TaggedOutput("metrics", {
                **self.ids, "domain": domain, "name": name, "value": float(value),
                "created_at": now()})

    def expand(self, tasks):
        exclude = self.exclude
        keyed = (tasks
                 | "NotExcluded" >> beam.Filter(lambda t: t["task_id"] not in exclude)
                 | "ById" >> beam.Map(lambda t: ((t["domain"], t["task_id"]), t)))
        per_domain = (keyed
                      | "Ids" >> beam.Map(lambda kv: kv[0])
                      | "ByDomain" >> beam.GroupByKey())
        capacity = (per_domain
                    | "Candidates" >> beam.Map(lambda kv: (kv[0], len(set(kv[1]))))
                    | "Capacity" >> beam.combiners.ToDict())
        history = (tasks.pipeline | "History" >> beam.Create(sorted(self.history.items())))
        selected = per_domain | "Select" >> beam.ParDo(
            _Select(self), beam.pvalue.AsSingleton(capacity),
            beam.pvalue.AsDict(history)).with_outputs("metrics", main="chosen")
        joined = ({"task": keyed, "chosen": selected.chosen} | "Join" >> beam.CoGroupByKey())
        chosen = joined | "Chosen" >> beam.FlatMap(_scaled)
        return {"tasks": chosen, "metrics": selected.metrics}


def _scaled(kv):
    """The task, when chosen, marked with its group scale when that is more than 1."""
    tasks, scales = kv[1]["task"], kv[1]["chosen"]
    if not scales:
        return []
    return [t if scales[0] == 1 else {**t, "group_scale": scales[0]} for t in tasks]


class _Select(beam.DoFn):
    def __init__(self, owner: SampleByBudget):
        self.owner = owner

    def process(self, kv, capacity, history):
        yield from self.owner._select(kv, capacity, history)
