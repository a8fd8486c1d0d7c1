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
import subprocess
import time
from pathlib import Path

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.config import RunConfig
from flywheel.loop.iteration import (Event, checkpoint_after, commit, evaluate_policy, roll_out,
                                     update_checkpoints)
from flywheel.settings.layout import RunLayout
from flywheel.loop.overlap import run_overlapped
from flywheel.loop.run_sandbox import not_for_a_run_to_choose
from flywheel.feedback.review_rewards import review_before_update
from flywheel.policy.backends import POLICIES
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.schemas.storage import join, read_file
from flywheel.schemas import SCHEMA_VERSION, TABLES
from flywheel.trainer.train import train_iteration
from flywheel.transforms.policy_model import close_worker_model



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
    stored sandbox is taken only when a run directory may choose it (loop/run_sandbox.py):
    otherwise the user names it.
    """
    if layout.exists(layout.run_json):
        info = layout.read_json(layout.run_json)
        try:
            stored = RunConfig.from_dict(info["config"])
        except ValueError as e:  # a key that moved since the run was started (config.RENAMED_KEYS)
            raise RunConfigMismatch(f"{layout.run_json}: {e}") from None
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
    from flywheel.loop.warm_start import warm_start
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


def run_iterations(run_dir: str, config: RunConfig, *, explicit: set[str] = frozenset(),
                   options: PipelineOptions | None = None, event: Event | None = None) -> dict:
    """Run (or resume) iterations until `config.iterations` are committed; returns run info.
    With [overlap] max_staleness > 0 the loop is loop/overlap.py's."""
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
            start, older = update_checkpoints(config, layout, initial, k,
                                              reviewed=bool(reviewed["rows"]))
            event("train_begin", {"iteration": k})
            started = time.time()
            stats = train_iteration(layout.table_dir("trajectories", k), start,
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
