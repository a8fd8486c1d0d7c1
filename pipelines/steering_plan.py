"""The driver's side of steering: an iteration's candidate tasks and what SampleByBudget needs.

Unsteered (the defaults), an iteration reads today's ranges (`rollout.task_ranges`) and nothing
is sampled, so its tables are those of a run without steering. Steered, each generated domain
offers a fresh window of tasks (as many as its quota estimate, the windows of successive
iterations never overlapping) plus the earlier tasks its sampler would revisit (retries, the
error set, the curriculum's band), their history read with SQL (steering/history.py); a task
file offers its every training task, with its history. The plan's figures are written to
iterations/K/plan.json.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from flywheel.domains.registry import generating_domains
from flywheel.settings.config import RunConfig, SteeringSettings
from flywheel.settings.layout import RunLayout
from flywheel.steering.budgets import Budget, quotas
from flywheel.steering.history import task_history
from flywheel.steering.samplers import SAMPLERS, Policy, priority
from flywheel.transforms.domain_scale import prior_from_metrics
from flywheel.transforms.tasks import TaskRange

REVISIT_CLASSES = ("retry", "error", "band")
REVISIT_FACTOR = 4  # at most this many times a domain's quota estimate of earlier tasks are offered
INDEX = re.compile(r"-train-(\d+)$")


def sampling_active(s: SteeringSettings) -> bool:
    """Whether an iteration's tasks are sampled at all (else every candidate is trained on)."""
    d = SteeringSettings()
    return (s.sampler != d.sampler or s.weights or s.tiers or s.tier_shares or s.floor
            or s.attempts or s.error_share)


@dataclass
class SamplingPlan:
    ranges: list[TaskRange]
    sample: dict | None = None                     # SampleByBudget's arguments; None: no sampling
    summary: dict = field(default_factory=dict)
    prior: dict | None = None                      # ScaleByDomain's running statistics so far
    shares: dict | None = None                     # and its target shares (the budget's, if set)
    prefix: str = "part"                           # the written files' prefix (top-ups: their own)
    top_up: bool = False                           # a top-up rollout: no metrics of its own


def budget_of(s: SteeringSettings) -> Budget:
    return Budget.parse(s.weights, s.tiers, s.tier_shares, s.floor)


def plan_iteration(config: RunConfig, layout: RunLayout, iteration: int,
                   unsteered: list[TaskRange]) -> SamplingPlan:
    """The plan of `iteration`; `unsteered` are its ranges without steering (rollout.task_ranges)."""
    plan = _sampling_plan(config, layout, iteration, unsteered)
    if config.algorithm.domain_scale != "none":
        budget = budget_of(config.steering)
        rows = layout.read_table("metrics", columns=["iteration", "domain", "name", "value"])
        plan.prior = prior_from_metrics(r for r in rows.to_pylist() if r["iteration"] < iteration)
        plan.shares = None if budget.is_default() else budget.shares(_known(config, budget))
    return plan


def _known(config: RunConfig, budget: Budget) -> list[str]:
    """The domains known before the read: the generating ones of the run and those the budget names."""
    generating = generating_domains(config.rollout.domains)
    return sorted(set(generating) | budget.named_domains())


def _sampling_plan(config: RunConfig, layout: RunLayout, iteration: int,
                   unsteered: list[TaskRange]) -> SamplingPlan:
    s, r = config.steering, config.rollout
    if not sampling_active(s):
        return SamplingPlan(unsteered)
    budget, policy = budget_of(s), Policy.from_settings(s)
    sampler = SAMPLERS.get(s.sampler)()
    generating = generating_domains(r.domains)
    known = _known(config, budget)
    tasks = s.attempts // max(1, r.n_samples) if s.attempts else r.tasks_per_domain * len(known)
    estimate = quotas(budget.shares(known), tasks)
    history = task_history(layout.join("tables"), before=iteration)
    ranges, offered, revisits = [], {}, {}
    for d in generating:
        window = max(1, estimate.get(d, 1))
        ranges.append(TaskRange(d, "train", iteration * window, (iteration + 1) * window))
        picks = []
        for stats in (h for h in history.values() if h.domain == d):
            c = sampler.classify(stats.task_id, stats, policy)
            m = INDEX.search(stats.task_id)
            if c.klass in REVISIT_CLASSES and m:
                picks.append((priority(config.seed, iteration, c.task_id, c.weight), c.task_id,
                              int(m.group(1))))
        picks = sorted(picks)[:REVISIT_FACTOR * window]
        fresh = range(iteration * window, (iteration + 1) * window)
        picks = [(t, i) for _, t, i in picks if i not in fresh]
        ranges += [TaskRange(d, "train", i, i + 1) for _, i in sorted(picks, key=lambda p: p[1])]
        offered.update((t, history[t]) for t, _ in picks)
        revisits[d] = len(picks)
    offered.update((t, h) for t, h in history.items() if h.domain not in generating)
    sample = dict(sampler=s.sampler, policy=policy, budget=budget, attempts=s.attempts,
                  tasks_per_domain=r.tasks_per_domain, n_samples=r.n_samples, seed=config.seed,
                  history=offered, fill_repeats=s.fill_repeats)
    summary = {"iteration": iteration, "seed": config.seed, "sampler": s.sampler,
               "estimated_quotas": estimate, "revisits_offered": revisits,
               "history_tasks": len(history), "history_offered": len(offered)}
    heldout = [t for t in unsteered if t.split != "train"]
    return SamplingPlan(ranges + heldout, sample, summary)


def check_steering(s: SteeringSettings) -> None:
    """ValueError naming the setting when a steering setting cannot be used."""
    budget_of(s)
    Policy.from_settings(s)
    SAMPLERS.get(s.sampler)
    if s.attempts < 0:
        raise ValueError(f"steering.attempts {s.attempts}: expected >= 0")
    if s.fill_repeats < 1:
        raise ValueError(f"steering.fill_repeats {s.fill_repeats}: expected >= 1 (1: never)")
    if not 0.0 <= s.top_up < 1.0:
        raise ValueError(f"steering.top_up {s.top_up}: expected a share of the groups in [0, 1)")
    if s.top_up_rounds < 0 or s.top_up_attempts < 0:
        raise ValueError("steering.top_up_rounds and steering.top_up_attempts must be >= 0")
