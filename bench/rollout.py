"""Rollout throughput: the Beam pipeline vs a plain Python loop doing the same work.

    python bench/rollout.py [--tasks-per-domain 64] [--n-samples 8] [--checkpoint URI]

The same tasks, policy, sampling seeds, sandbox and verifiers run three ways, side by side:
Beam DirectRunner in-memory, Beam DirectRunner multi_processing with 2 workers, and the plain
loop (generate -> execute -> verify per batch, no Beam). The Beam runs include pipeline start-up
and writing the Parquet tables; the plain loop writes nothing. Prints tasks/s and ratios.
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from apache_beam.options.pipeline_options import PipelineOptions  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from flywheel.settings.config import RolloutSettings, RunConfig  # noqa: E402
from flywheel.settings.layout import RunLayout  # noqa: E402
from flywheel.pipelines.plain_rollout import plain_rollout  # noqa: E402
from flywheel.pipelines.rollout import IterationSpec, run_rollout  # noqa: E402
from flywheel.domains.registry import get_domain  # noqa: E402
from flywheel.policy.checkpoint import load_checkpoint  # noqa: E402
from flywheel.policy.backends import create_policy  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks-per-domain", type=int, default=64)
    p.add_argument("--n-samples", type=int, default=8)
    p.add_argument("--checkpoint", default=None, help="policy checkpoint (default: fresh init)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    logging.getLogger("apache_beam").setLevel(logging.ERROR)

    config = RunConfig(seed=args.seed, rollout=RolloutSettings(
        tasks_per_domain=args.tasks_per_domain, heldout_per_domain=0, n_samples=args.n_samples))
    r = config.rollout
    n_tasks = len(r.domains) * r.tasks_per_domain
    results = {}

    def beam_run(name: str, beam_args: list[str]) -> None:
        with tempfile.TemporaryDirectory() as run_dir:
            spec = IterationSpec("bench", 0, 0, args.checkpoint)
            start = time.perf_counter()
            run_rollout(config, spec, RunLayout(run_dir), PipelineOptions(beam_args))
            results[name] = time.perf_counter() - start

    def plain_run() -> None:
        start = time.perf_counter()
        policy = (load_checkpoint(args.checkpoint).policy if args.checkpoint
                  else create_policy(config.policy.backend, config.policy.parsed_options(),
                                     config.seed))
        policy.module.eval()
        tasks = [get_domain(d).make_task("train", i, config.seed)
                 for d in r.domains for i in range(r.tasks_per_domain)]
        plain_rollout(policy, tasks, n_samples=r.n_samples, temperature=r.temperature,
                      seed=config.seed, sandbox=r.sandbox, batch_size=r.max_batch_size)
        results["plain loop"] = time.perf_counter() - start

    plain_run()
    beam_run("beam in-memory", ["--runner=DirectRunner"])
    beam_run("beam multi_processing x2", ["--runner=DirectRunner",
                                          "--direct_running_mode=multi_processing",
                                          "--direct_num_workers=2"])
    table = Table(title=f"rollout: {n_tasks} tasks x {r.n_samples} samples "
                        f"({n_tasks * r.n_samples} attempts), domains {', '.join(r.domains)}")
    for col in ("way", "seconds", "tasks/s", "attempts/s", "vs plain loop"):
        table.add_column(col, justify="right")
    base = n_tasks / results["plain loop"]
    for name, seconds in results.items():
        rate = n_tasks / seconds
        table.add_row(name, f"{seconds:.2f}", f"{rate:.1f}", f"{rate * r.n_samples:.0f}",
                      f"{rate / base:.2f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
