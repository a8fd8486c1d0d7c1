"""Checks a local run or evaluation makes before it starts: can each domain's attempts run here?

A render domain whose sandbox environment is missing, or sits where the sandbox's leased uid
cannot reach it (under /root), would otherwise roll out normally and then turn every attempt into
an environment error row, after the policy spent the rollout generating them (30 minutes of a
SmolLM2 evaluation on this machine). Only for the local runners: Dataflow or Flink workers have
their own disks, which this machine cannot see.
"""
from __future__ import annotations

from flywheel.domains.registry import get_domain

LOCAL_RUNNERS = ("DirectRunner", "SwitchingDirectRunner", "BundleBasedDirectRunner",
                 "FnApiRunner", "PrismRunner", None, "")


def setup_problems(config, runner: str | None) -> list[str]:
    """One line per domain of `config` that cannot run its attempts on this machine (each
    domain's `preflight`), or [] (also for a remote runner, whose workers are not this machine)."""
    if runner not in LOCAL_RUNNERS:
        return []
    problems = []
    for name in config.rollout.domains:
        try:
            why = get_domain(name).preflight(config.rollout.sandbox)
        except KeyError:  # an unknown domain: the run's own check names it
            continue
        if why:
            problems.append(f"domain {name}: {why}")
    return problems
