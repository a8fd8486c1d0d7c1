"""The rollout work without Beam: generate, execute, verify in a plain Python loop.

Used where a pipeline would be overkill (the warm start's periodic checks) and as the baseline
that bench/rollout.py measures the Beam pipeline against. It calls the same functions as the
pipeline's DoFns, so both score an attempt identically.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from flywheel.policy.rollout_engine import engine_for
from flywheel.records.attempt import Attempt
from flywheel.domains.tool_runner import ToolRunner
from flywheel.transforms.execute import execute_batch
from flywheel.transforms.expand import expand_task
from flywheel.transforms.filters import apply_filters
from flywheel.transforms.generate import generate_batch
from flywheel.sandbox import get_backend
from flywheel.transforms.verify import verify_attempt
from flywheel.verifiers.bounded import Bounds, shared


def plain_rollout(policy, tasks: list[dict], *, n_samples: int, temperature: float, seed: int,
                  iteration: int = 0, mode: str = "train", sandbox: str = "local",
                  batch_size: int = 256, workers: int = 4, backend=None,
                  sandbox_options: dict | None = None, bounds: Bounds = Bounds()):
    """Scored attempts and error rows for `tasks`, one batch at a time; every verification is
    bounded by `bounds` as in the pipeline's Verify step, in this process's shared worker (the
    warm start calls this every few hundred steps: a worker start costs seconds)."""
    attempts = [a for t in tasks for a in expand_task(
        t, run_id="plain", iteration=iteration, policy_version=0, seed=seed,
        n_samples=n_samples, temperature=temperature, mode=mode)]
    own_backend = backend is None
    backend = backend or get_backend(sandbox, **(sandbox_options or {}))
    scored, errors = [], []
    engine = engine_for(policy, local=True)  # the policy as it is now, sampled in this process
    try:
        bounded = shared(bounds)
        with ThreadPoolExecutor(workers) as pool:
            for start in range(0, len(attempts), batch_size):
                batch = attempts[start:start + batch_size]
                batch = [a.replace(**g) for a, g in zip(batch, generate_batch(policy, batch, engine))]
                executed, errs = execute_batch(batch, ToolRunner(backend), pool)
                errors += errs
                for attempt in executed:
                    out, err = verify_attempt(attempt, bounded)
                    scored.append(apply_filters(out))
                    if err:
                        errors.append(err)
    finally:
        if own_backend:
            backend.close()
    return scored, errors


def pass_rate_by_domain(scored: list[Attempt]) -> dict[str, float]:
    passes, totals = defaultdict(int), defaultdict(int)
    for a in scored:
        totals[a.domain] += 1
        passes[a.domain] += a.verdict == "pass"
    return {d: passes[d] / totals[d] for d in sorted(totals)}
