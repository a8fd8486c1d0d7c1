"""The iteration driver: warm start, then rollout -> train -> commit, resumable at any point.

An iteration is committed (iterations/K/_COMMITTED, written last) only once its tables and its
checkpoint are complete. A run killed anywhere resumes from the last committed iteration: the
incomplete one is deleted and rewritten, so no row is lost or duplicated.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import resource
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.pipelines import domain_watch
from flywheel.pipelines.config import RunConfig
from flywheel.pipelines.layout import RunLayout
from flywheel.pipelines.review_rewards import review_before_update
from flywheel.pipelines.rollout import IterationSpec, run_rollout, task_ranges
from flywheel.pipelines.steering_plan import plan_iteration
from flywheel.pipelines.top_up import top_up
from flywheel.pipelines.run_sandbox import not_for_a_run_to_choose
from flywheel.schemas import SCHEMA_VERSION, TABLES
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.policy.checkpoint_files import join, read_file
from flywheel.policy.backends import POLICIES
from flywheel.trainer.train import train_iteration
from flywheel.transforms.policy_model import close_worker_model
from flywheel.transforms.write_tables import write_parquet

Event = Callable[[str, dict], None]


class RunConfigMismatch(ValueError):
    """A resumed run was asked to continue with settings other than those it was started with."""


def code_version() -> str:
    """The git commit of the Flywheel source (with +dirty), or the package version."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if sha:
            return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    from importlib.metadata import version
    return version("flywheel")


def _lookup(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return list(d) if isinstance(d, tuple) else d


def open_run(layout: RunLayout, config: RunConfig, explicit: set[str]) -> tuple[RunConfig, dict]:
    """Create run.json, or load it and check the requested settings against it.

    On resume the stored config wins; only `iterations` may change. A setting the user passed
    explicitly that differs from the stored one is an error rather than a silently mixed run. The
    stored sandbox is taken only when a run directory may choose it (pipelines/run_sandbox.py):
    otherwise the user names it.
    """
    if layout.exists(layout.run_json):
        info = layout.read_json(layout.run_json)
        stored = RunConfig.from_dict(info["config"])
        requested, kept = config.to_dict(), stored.to_dict()
        for key in sorted(explicit - {"iterations"}):
            want, have = _lookup(requested, key), _lookup(kept, key)
            if want != have:
                raise RunConfigMismatch(
                    f"{layout.run_json} was created with {key}={have!r}, not {want!r}; "
                    "resume with the same settings or use a new --run-dir")
        stored = RunConfig.from_dict({**kept, "iterations": config.iterations})
        why = not_for_a_run_to_choose(stored.rollout.sandbox)
        if why and "rollout.sandbox" not in explicit:
            raise RunConfigMismatch(
                f"{layout.run_json} names the sandbox backend {stored.rollout.sandbox!r}, which "
                f"{why}; a run directory cannot choose it for you. Resume with --sandbox "
                f"{stored.rollout.sandbox} if you trust this run, or start a new --run-dir")
        return stored, info
    info = {
        "run_id": Path(layout.root.rstrip("/")).name,
        "config": config.to_dict(), "seed": config.seed, "code_version": code_version(),
        "schema_versions": {t: SCHEMA_VERSION for t in TABLES},
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(),
    }
    layout.write_json(layout.run_json, info)
    return config, info


def ensure_initial_policy(layout: RunLayout, config: RunConfig, event: Event) -> str:
    """The warm-started policy's checkpoint URI, training it first if no committed one exists."""
    uri = layout.checkpoint(None)
    if layout.exists(layout.initial_marker()):
        return uri
    if config.policy.init_checkpoint:
        return copy_initial_policy(layout, config, event)
    from flywheel.pipelines.warm_start import warm_start
    event("warm_start_begin", {"max_steps": config.warm_start.max_steps})
    started = time.time()
    policy, report, optimizer = warm_start(config, progress=lambda step, s: event(
        "warm_start_step", {"step": step, **s}))
    carried = optimizer if config.warm_start.carry_optimizer else None
    save_checkpoint(uri, policy, carried, {"policy_version": 0, "warm_start": report,
                                           "optimizer_carried": carried is not None})
    layout.write_json(layout.initial_marker(), {"seconds": time.time() - started, **report})
    event("warm_start_end", {"seconds": time.time() - started, **report})
    return uri


def copy_initial_policy(layout: RunLayout, config: RunConfig, event: Event) -> str:
    """`--init-checkpoint`: the given checkpoint (an SFT or DPO output, another run's) loaded as
    the trainer loads one (its digest checked) and saved as this run's initial policy, without
    its optimizer state (the RL update starts a fresh Adam at the run's learning rate)."""
    source, uri = config.policy.init_checkpoint, layout.checkpoint(None)
    event("init_checkpoint", {"from": source})
    loaded = load_checkpoint(source)
    backend = json.loads(read_file(join(source, "config.json")))["backend"]
    if backend != config.policy.backend:
        raise RunConfigMismatch(f"--init-checkpoint {source} holds a {backend!r} policy but the "
                                f"run's policy backend is {config.policy.backend!r}: give "
                                f"--policy {backend}")
    save_checkpoint(uri, loaded.policy, None, {"policy_version": 0, "init_checkpoint": source,
                                               "init_digest": loaded.digest,
                                               "source_meta": loaded.meta})
    layout.write_json(layout.initial_marker(), {"init_checkpoint": source,
                                                "digest": loaded.digest})
    return uri


def pretrained_skips_warm_start(config: RunConfig, explicit: set[str]) -> RunConfig:
    """A pretrained policy (its backend class says `pretrained = True`) starts RL as it is: the
    supervised warm start, made for the tiny policy, runs only when warm_start.max_steps is given."""
    backend = POLICIES.get(config.policy.backend)
    if config.policy.init_checkpoint and "warm_start.max_steps" not in explicit:
        return dataclasses.replace(config, warm_start=dataclasses.replace(config.warm_start,
                                                                          max_steps=0))
    if "warm_start.max_steps" in explicit or not getattr(backend, "pretrained", False):
        return config
    return dataclasses.replace(config, warm_start=dataclasses.replace(config.warm_start, max_steps=0))


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
    """Per-domain monitoring of the iteration's rollout (pipelines/domain_watch.py): `watch/*`
    metrics rows, and a `domain_warning` event (run.log) for each warning, kept as rows too."""
    rows = domain_watch.domain_rows(layout.root, iteration, info["run_id"])
    earlier = layout.read_table("metrics", columns=["iteration", "domain", "name", "value"])
    history = [r for r in earlier.to_pylist() if r["iteration"] <= iteration] + rows
    found = domain_watch.warnings(history, iteration)
    write_parquet(layout.join("tables", "metrics", f"iteration={iteration}", "watch.parquet"),
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
    result = run_rollout(config, spec, layout, options, plan)
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    if config.steering.top_up > 0:  # dynamic sampling: more tasks while signal is short
        top_up(config, layout, k, plan, lambda p: run_rollout(config, spec, layout, options, p),
               event)
    watch_domains(layout, info, k, event)
    ended = time.time()
    return {"iteration": k, "rollout_seconds": ended - started, "counters": counters,
            "sampled_from": {"checkpoint": policy, "policy_version": version},
            "stages": {"rollout": [started, ended]},
            "driver_peak_rss_mb": {"rollout": peak_rss_mb()}}


def commit(layout: RunLayout, info: dict, k: int, rollout: dict, stats: dict,
           train_window: tuple[float, float], event: Event) -> dict:
    """Write iteration k's trainer metrics, then its commit marker (last); returns the marker."""
    write_parquet(layout.join("tables", "metrics", f"iteration={k}", "trainer.parquet"),
                  "metrics", _trainer_metrics(info, k, stats))
    summary = {**rollout, "train_seconds": train_window[1] - train_window[0], "train": stats,
               "stages": {**rollout["stages"], "train": list(train_window)},
               "driver_peak_rss_mb": {**rollout["driver_peak_rss_mb"], "train": peak_rss_mb()}}
    layout.write_json(layout.commit_marker(k), summary)
    event("iteration_end", summary)
    return summary


def run_iterations(run_dir: str, config: RunConfig, *, explicit: set[str] = frozenset(),
                   options: PipelineOptions | None = None, event: Event | None = None) -> dict:
    """Run (or resume) iterations until `config.iterations` are committed; returns run info.
    With [overlap] max_staleness > 0 the loop is pipelines/overlap.py's."""
    event = event or (lambda name, data: None)
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    layout = RunLayout(run_dir)
    config, info = open_run(layout, pretrained_skips_warm_start(config, set(explicit)), set(explicit))
    committed = layout.committed_iterations()
    first = committed[-1] + 1 if committed else 0
    event("run_begin", {"run_dir": run_dir, "run_id": info["run_id"], "first": first,
                        "iterations": config.iterations, "resumed": bool(committed)})
    overlapped = config.overlap.max_staleness > 0 or config.overlap.trainer_processes > 1
    initial = ensure_initial_policy(layout, config, event)
    if overlapped:
        from flywheel.pipelines.overlap import run_overlapped
        run_overlapped(config, layout, info, initial, first, options, event)
    else:
        for k in range(first, config.iterations):
            layout.delete_iteration(k)  # leftovers of a killed attempt at this iteration
            if config.evaluation.every and k % config.evaluation.every == 0:
                evaluate_policy(config, layout, info, k, checkpoint_after(layout, initial, k - 1),
                                options, event)
            rollout = roll_out(config, layout, info, k, initial, options, event)
            # people's labels join this update (review_rewards.py): sampled up to max_wait back
            reviewed = review_before_update(layout, info["run_id"], k, config.review,
                                            config.algorithm, config.seed, event)
            older = [checkpoint_after(layout, initial, k - 1 - s)
                     for s in range(1, config.review.max_wait + 1)] if reviewed["rows"] else []
            event("train_begin", {"iteration": k})
            started = time.time()
            stats = train_iteration(layout.table_dir("trajectories", k),
                                    checkpoint_after(layout, initial, k - 1),
                                    layout.checkpoint(k), config.train,
                                    seed=config.seed * 1_000_003 + k,
                                    reference_checkpoint_uri=initial, algorithm=config.algorithm,
                                    older_checkpoint_uris=older)
            commit(layout, info, k, rollout, stats, (started, time.time()), event)
    last = config.iterations
    if config.evaluation.every and last > 0 and not layout.exists(layout.table_dir("evaluations", last)):
        evaluate_policy(config, layout, info, last, layout.checkpoint(last - 1), options, event)
    close_worker_model()  # the in-process worker's engine (vLLM's processes) ends with the run
    event("run_end", {"run_dir": run_dir})
    return info
