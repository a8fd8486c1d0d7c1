"""Dynamic sampling: when too few of an iteration's groups carry signal, roll out further tasks.

DAPO keeps sampling until its batch holds enough groups whose rewards differ; with a policy that
solves (or fails) nearly everything that loop can run for ever (DAPO issue 22). Here a top-up is
bounded three ways: at most `top_up_rounds` rollouts, at most `top_up_attempts` times the batch's
attempts in all, and a round that adds nothing ends it. The target is `top_up` x the batch's
groups carrying signal; each round asks for the missing groups divided by the signal rate seen
so far (at least `MIN_RATE`), spread over the domains by their share of the batch times their
own signal rate, so compute goes where signal comes from.

A round is a rollout of its own (pipelines/rollout.py with a top-up plan): generated domains
offer fresh tasks numbered from `TOP_UP_BASE` (never an iteration's window), task files their
tasks not yet trained on this iteration; its files are `topup-R-*` beside the batch's in the
iteration's partitions, so the trainer and SQL see one batch. What it cost is written as
`steer/top_up_*` metrics rows (domain '*').
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable

import pyarrow.compute as pc

from flywheel.domains.registry import generating_domains
from flywheel.settings.config import RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.steering_plan import SamplingPlan
from flywheel.steering.budgets import Budget, quotas
from flywheel.steering.samplers import Policy
from flywheel.transforms.tasks import TaskRange
from flywheel.schemas.write import write_rows

TOP_UP_BASE = 1_000_000_000
ROUND_STRIDE = 100_000       # task indices per (iteration, round): far above any round's need
MIN_RATE = 0.05


def batch_signal(layout: RunLayout, iteration: int) -> dict:
    """The iteration's trajectories so far: attempts, groups and groups with signal, per domain,
    and the task ids trained on."""
    table = layout.read_table("trajectories", columns=["domain", "task_id", "group_id", "filtered"],
                              filter=pc.field("iteration") == iteration)
    domains: dict[str, dict] = {}
    groups: dict[tuple[str, str], bool] = {}
    for row in table.to_pylist():
        d = domains.setdefault(row["domain"], {"attempts": 0})
        d["attempts"] += 1
        key = (row["domain"], row["group_id"])
        groups[key] = groups.get(key, False) or not row["filtered"]
    for d in domains.values():
        d.update(groups=0, signal=0)
    for (domain, _), signal in groups.items():
        domains[domain]["groups"] += 1
        domains[domain]["signal"] += int(signal)
    used = frozenset(table.column("task_id").to_pylist())
    return {"domains": domains, "used": used,
            "attempts": sum(d["attempts"] for d in domains.values()),
            "groups": len(groups), "signal": sum(groups.values())}


def round_plan(config: RunConfig, iteration: int, round_: int, seen: dict, tasks: int,
               base: SamplingPlan) -> SamplingPlan:
    """The top-up rollout of `tasks` further tasks, spread by share x signal rate."""
    weights = {}
    for domain, d in sorted(seen["domains"].items()):
        rate = d["signal"] / d["groups"] if d["groups"] else 0.0
        weights[domain] = d["attempts"] / seen["attempts"] * (rate + MIN_RATE)
    budget = Budget.parse([f"{k}={v!r}" for k, v in weights.items()])
    estimate = quotas(budget.shares(weights), tasks, at_least_one=False)
    start = TOP_UP_BASE + (iteration * 100 + round_) * ROUND_STRIDE
    ranges = [TaskRange(d, "train", start, start + min(ROUND_STRIDE, q + 1))
              for d, q in sorted(estimate.items())
              if d in generating_domains(config.rollout.domains)]
    sample = dict(sampler="uniform", policy=Policy(env_retries=0), budget=budget,
                  attempts=tasks * config.rollout.n_samples,
                  tasks_per_domain=config.rollout.tasks_per_domain,
                  n_samples=config.rollout.n_samples, seed=config.seed, history={},
                  exclude=seen["used"], at_least_one=False)  # never past the attempts allowed
    return SamplingPlan(ranges, sample, {"round": round_, "tasks": tasks}, prior=base.prior,
                        shares=base.shares, prefix=f"topup-{round_}", top_up=True)


def top_up(config: RunConfig, layout: RunLayout, iteration: int, base: SamplingPlan,
           rollout: Callable[[SamplingPlan], object], event: Callable[[str, dict], None]) -> dict:
    """Top the iteration's batch up (see the module); returns the figures written as metrics."""
    s, n = config.steering, config.rollout.n_samples
    seen = batch_signal(layout, iteration)
    batch_groups, before = seen["groups"], seen["signal"]
    target = math.ceil(s.top_up * batch_groups)
    allowed = int(s.top_up_attempts * seen["attempts"])
    spent = rounds = 0
    while rounds < s.top_up_rounds and seen["signal"] < target and spent + n <= allowed:
        rate = max(MIN_RATE, seen["signal"] / seen["groups"] if seen["groups"] else 0.0)
        tasks = min(math.ceil((target - seen["signal"]) / rate), (allowed - spent) // n)
        rounds += 1
        event("top_up_begin", {"iteration": iteration, "round": rounds, "tasks": tasks,
                               "signal": seen["signal"], "target": target})
        rollout(round_plan(config, iteration, rounds, seen, tasks, base))
        after = batch_signal(layout, iteration)
        added = after["attempts"] - seen["attempts"]
        spent += added
        seen = after
        if added == 0:  # nothing left to offer: stop rather than spin
            break
    figures = {"top_up_rounds": rounds, "top_up_attempts": spent,
               "top_up_attempt_ratio": spent / max(1, seen["attempts"] - spent),
               "signal_groups_target": target, "signal_groups_before": before,
               "signal_groups_after": seen["signal"], "batch_groups": batch_groups,
               "top_up_filled": float(seen["signal"] >= target)}
    if s.top_up > 0:
        now = dt.datetime.now(dt.timezone.utc)
        write_rows(layout.join("tables", "metrics", f"iteration={iteration}", "topup.parquet"),
                      "metrics", [{"run_id": base.summary.get("run_id") or _run_id(layout),
                                   "iteration": iteration, "domain": "*", "name": f"steer/{k}",
                                   "value": float(v), "policy_version": iteration,
                                   "created_at": now} for k, v in figures.items()])
        event("top_up_end", {"iteration": iteration, **figures})
    return figures


def _run_id(layout: RunLayout) -> str:
    return layout.read_json(layout.run_json)["run_id"]
