"""The steps of one iteration that the driver's loop (driver.py) and the overlapped one
(overlap.py) share: roll out, evaluate, watch the domains, commit; and the one rule for which
checkpoints an update starts from and may read rows of (`update_checkpoints`). Here rather than in
either loop, so that neither imports the other."""

from __future__ import annotations

import datetime as dt
import resource
import time
from collections.abc import Callable

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.loop import domain_watch
from flywheel.loop.episode_watch import EpisodeWatch
from flywheel.settings.config import RunConfig
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.steering_plan import plan_iteration
from flywheel.loop.top_up import top_up
from flywheel.pipelines.rollout import IterationSpec, run_rollout, task_ranges
from flywheel.transforms.episode_journal import journal_folder
from flywheel.schemas.write import write_rows

Event = Callable[[str, dict], None]


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (the kernel's high-water mark, which
    never goes down: an iteration's figure is the largest of it and every earlier one)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _trainer_metrics(info: dict, iteration: int, stats: dict) -> list[dict]:
    now = dt.datetime.now(dt.timezone.utc)
    return [{"run_id": info["run_id"], "iteration": iteration, "domain": "*", "name": f"train/{k}",
             "value": float(v), "policy_version": iteration, "created_at": now}
            for k, v in sorted(stats.items()) if isinstance(v, (int, float))]


def evaluate_policy(config: RunConfig, layout: RunLayout, info: dict, version: int, checkpoint: str,
                    options: PipelineOptions | None, event: Event) -> list[dict]:
    """--eval-every: `flywheel eval` of policy version `version` (the checkpoint iteration
    `version` samples from; the run's iteration count for the last one) on the held-out tasks,
    into the run's evaluations and metrics tables under iteration=`version`."""
    from flywheel.pipelines.evaluation import EvalSpec, evaluate
    e, r = config.evaluation, config.rollout
    tasks = min(e.tasks, r.heldout_per_domain)
    scoped = RunConfig.from_dict({**config.to_dict(), "rollout": {**config.to_dict()["rollout"],
                                                                  "heldout_per_domain": tasks}})
    spec = EvalSpec(name=f"n={e.n},t={r.temperature:g}", run_id=info["run_id"], iteration=version,
                    checkpoint_uri=checkpoint, n=e.n, temperature=r.temperature,
                    self_verify=e.self_verify)
    event("eval_begin", {"iteration": version})
    summaries = evaluate(scoped, spec, layout, ks=e.k_values(), options=options)
    event("eval_end", {"iteration": version, "summaries": summaries})
    return summaries


def watch_domains(layout: RunLayout, info: dict, iteration: int, event: Event) -> list[dict]:
    """Per-domain monitoring of the iteration's rollout (loop/domain_watch.py): `watch/*`
    metrics rows, and a `domain_warning` event (run.log) for each warning, kept as rows too."""
    rows = domain_watch.domain_rows(layout.root, iteration, info["run_id"])
    earlier = layout.read_table("metrics", columns=["iteration", "domain", "name", "value"])
    history = [r for r in earlier.to_pylist() if r["iteration"] <= iteration] + rows
    found = domain_watch.warnings(history, iteration)
    write_rows(layout.join("tables", "metrics", f"iteration={iteration}", "watch.parquet"),
                  "metrics", rows + domain_watch.warning_rows(found, info["run_id"]))
    for w in found:
        event("domain_warning", w)
    return found


def checkpoint_after(layout: RunLayout, initial: str, iteration: int) -> str:
    """The checkpoint iteration `iteration`'s update wrote, the initial policy for any before 0."""
    return initial if iteration < 0 else layout.checkpoint(iteration)


def sampled_checkpoint(layout: RunLayout, initial: str, iteration: int, staleness: int
                       ) -> tuple[str, int]:
    """(checkpoint URI, policy version) iteration `iteration` samples from: checkpoint k-1-s
    (version k-s), the initial policy (version 0) before there is one."""
    source = iteration - 1 - staleness
    return checkpoint_after(layout, initial, source), max(source + 1, 0)


def update_checkpoints(config: RunConfig, layout: RunLayout, initial: str, k: int,
                       reviewed: bool = False) -> tuple[str, list[str]]:
    """(start, older) of iteration k's update: it starts from checkpoint k-1 and may read rows
    sampled by the `older` checkpoints too, nearest first: the max_staleness ones before the
    start (an overlapped run's), and with `reviewed` (people's labels join the update, sampled up
    to review.max_wait iterations earlier) max_wait more. Only those that exist: the initial
    policy stands, once, for every one before the first. The trainer refuses rows of any other
    weights (trainer/off_policy.py check_staleness)."""
    start = checkpoint_after(layout, initial, k - 1)
    older = []
    lag = config.overlap.max_staleness + (config.review.max_wait if reviewed else 0)
    for v in range(k - 2, k - 2 - lag, -1):
        uri = checkpoint_after(layout, initial, v)
        if uri != start and uri not in older:
            older.append(uri)
    return start, older


def roll_out(config: RunConfig, layout: RunLayout, info: dict, k: int, initial: str,
             options: PipelineOptions | None, event: Event) -> dict:
    """Iteration k's rollout stages (plan, rollout, top-up, domain watch) into its tables;
    returns its part of the commit marker."""
    started = time.time()
    policy, version = sampled_checkpoint(layout, initial, k, config.overlap.max_staleness)
    spec = IterationSpec(info["run_id"], k, policy_version=version, checkpoint_uri=policy)
    plan = plan_iteration(config, layout, k, task_ranges(config, k))
    if plan.sample:
        layout.write_json(layout.join("iterations", str(k), "plan.json"), plan.summary)
    event("rollout_begin", {"iteration": k})
    with EpisodeWatch(journal_folder(layout.root, k), k, event):  # one event per ended episode
        result = run_rollout(config, spec, layout, options, plan)
        counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
        if config.steering.top_up > 0:  # dynamic sampling: more tasks while signal is short
            top_up(config, layout, k, plan,
                   lambda p: run_rollout(config, spec, layout, options, p), event)
    watch_domains(layout, info, k, event)
    ended = time.time()
    return {"iteration": k, "rollout_seconds": ended - started, "counters": counters,
            "sampled_from": {"checkpoint": policy, "policy_version": version},
            "stages": {"rollout": [started, ended]},
            "driver_peak_rss_mb": {"rollout": peak_rss_mb()}}


def commit(layout: RunLayout, info: dict, k: int, rollout: dict, stats: dict,
           train_window: tuple[float, float], event: Event) -> dict:
    """Write iteration k's trainer metrics, then its commit marker (last); returns the marker."""
    write_rows(layout.join("tables", "metrics", f"iteration={k}", "trainer.parquet"),
                  "metrics", _trainer_metrics(info, k, stats))
    summary = {**rollout, "train_seconds": train_window[1] - train_window[0], "train": stats,
               "stages": {**rollout["stages"], "train": list(train_window)},
               "driver_peak_rss_mb": {**rollout["driver_peak_rss_mb"], "train": peak_rss_mb()}}
    layout.write_json(layout.commit_marker(k), summary)
    layout.delete_paths([journal_folder(layout.root, k)])  # its tables hold every episode now
    event("iteration_end", summary)
    return summary
