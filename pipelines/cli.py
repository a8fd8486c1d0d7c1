"""The `flywheel` command line: run, sql, report, domains, tasks, verify, sandbox.

    flywheel run --run-dir runs/demo --iterations 6 --seed 0      # the embedded default
    flywheel sql "SELECT domain, avg(reward_raw) FROM trajectories GROUP BY 1" --run-dir runs/demo

Flags not listed here are standard Beam pipeline options and pass through to every pipeline
(--runner, --direct_running_mode, --direct_num_workers, ...).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import sys

from rich.console import Console
from rich.table import Table

from flywheel.pipelines import domains_cli, sandbox_cli, tasks_cli, verify_cli
from flywheel.pipelines.config import RunConfig, parse_options
from flywheel.trainer.advantages import ADVANTAGES
from flywheel.trainer.policies import POLICIES

# flag -> (dotted config key, type, help); None type means a comma-separated list of strings.
RUN_FLAGS = {
    "--iterations": ("iterations", int, "iterations to complete (a resumed run continues to this many)"),
    "--seed": ("seed", int, "seed of every random choice in the run"),
    "--domains": ("rollout.domains", None, "comma-separated built-in domains"),
    "--tasks": ("rollout.task_files", None, "comma-separated JSONL task file patterns"),
    "--tasks-per-domain": ("rollout.tasks_per_domain", int, "training tasks per domain per iteration"),
    "--heldout-per-domain": ("rollout.heldout_per_domain", int, "held-out tasks per domain"),
    "--n-samples": ("rollout.n_samples", int, "attempts per training task (group size)"),
    "--temperature": ("rollout.temperature", float, "sampling temperature"),
    "--advantage": ("rollout.advantage", str, ADVANTAGES.help("advantage estimator")),
    "--sandbox": ("rollout.sandbox", str, "sandbox backend (local, docker, unsafe-subprocess)"),
    "--sandbox-options": ("rollout.sandbox_options", None,
                          "comma-separated KEY=VALUE backend options, e.g. runtime=runsc"),
    "--policy": ("policy.backend", str, POLICIES.help("policy backend")),
    "--policy-options": ("policy.options", None,
                         "comma-separated KEY=VALUE options of the policy backend, e.g. d_model=128"),
    "--warm-start-max-steps": ("warm_start.max_steps", int, "upper bound on warm-start steps"),
    "--lr": ("train.lr", float, "RL learning rate"),
}


def _set(d: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for p in parents:
        d = d.setdefault(p, {})
    d[last] = value


def build_config(args: argparse.Namespace) -> tuple[RunConfig, set[str]]:
    values, explicit = RunConfig().to_dict(), set()
    for flag, (key, kind, _) in RUN_FLAGS.items():
        given = getattr(args, flag.lstrip("-").replace("-", "_"))
        if given is None:
            continue
        _set(values, key, tuple(x for x in given.split(",") if x) if kind is None else given)
        explicit.add(key)
    return RunConfig.from_dict(values), explicit


def cmd_run(args, beam_args: list[str], console: Console) -> int:
    from flywheel.pipelines.driver import RunConfigMismatch, run_iterations
    from flywheel.pipelines.progress import RunProgress
    from flywheel.pipelines.report import metric_table
    run_dir = args.run_dir or f"runs/{dt.datetime.now():%Y%m%d-%H%M%S}"
    config, explicit = build_config(args)
    try:
        parse_options(config.rollout.sandbox_options)
        POLICIES.get(config.policy.backend)
        config.policy.parsed_options()
    except (KeyError, ValueError) as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    if "--runner" not in " ".join(beam_args):
        beam_args = ["--runner=DirectRunner", *beam_args]
    console.print(f"[bold]flywheel run[/] -> run dir [cyan]{run_dir}[/]")
    try:
        with RunProgress(console, run_dir) as progress:
            run_iterations(run_dir, config, explicit=explicit, beam_args=beam_args,
                           event=progress.event)
    except RunConfigMismatch as e:
        console.print(f"[red]error:[/] {e}")
        return 2
    console.print(metric_table(run_dir))
    console.print("Look further with SQL, e.g.:\n  flywheel sql \"SELECT domain, avg(reward_raw), "
                  f"count(*) FROM trajectories GROUP BY 1\" --run-dir {run_dir}")
    return 0


def cmd_sql(args, console: Console) -> int:
    import duckdb
    from flywheel.pipelines.sql import query
    from flywheel.schemas import SchemaVersionError
    try:
        columns, rows = query(args.run_dir, args.query)
    except (duckdb.Error, SchemaVersionError) as e:
        console.print(f"[red]error:[/] {e}")
        return 1
    if args.format == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    elif args.format == "json":
        for row in rows:
            print(json.dumps(dict(zip(columns, row)), default=str))
    else:
        table = Table(*columns)
        for row in rows:
            table.add_row(*("NULL" if v is None else str(v) for v in row))
        console.print(table)
    return 0


def cmd_report(args, console: Console) -> int:
    from flywheel.pipelines.report import metric_table
    console.print(metric_table(args.run_dir, args.metric))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flywheel", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume RL iterations on the embedded default",
                         epilog="Other flags are Beam pipeline options (e.g. --runner).")
    run.add_argument("--run-dir", help="local path or gs:// URI (default runs/<timestamp>)")
    for flag, (_, kind, text) in RUN_FLAGS.items():
        run.add_argument(flag, type=kind or str, default=None, help=text)
    sql = sub.add_parser("sql", help="run DuckDB SQL over a run's tables")
    sql.add_argument("query")
    sql.add_argument("--run-dir", required=True)
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    report = sub.add_parser("report", help="a metric per domain and iteration (default: held-out pass@1)")
    report.add_argument("--run-dir", required=True)
    report.add_argument("--metric", default="heldout_pass@1",
                        help="a `metrics` name, e.g. train_pass_rate, zero_variance_frac, train/loss")
    for module in (domains_cli, sandbox_cli, tasks_cli, verify_cli):
        module.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    # Beam's in-process runner talks gRPC while the sandbox forks; gRPC logs every such fork.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    args, rest = parser().parse_known_args(argv)
    # machine-readable output goes to stdout alone; messages then go to stderr
    console = Console(stderr=args.command == "verify" or getattr(args, "format", "table") != "table")
    if args.command == "run":
        return cmd_run(args, rest, console)
    if rest:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    commands = {"sql": cmd_sql, "report": cmd_report, "domains": domains_cli.run,
                "tasks": tasks_cli.run, "verify": verify_cli.run,
                "sandbox": lambda args, console: sandbox_cli.main(args)}
    return commands[args.command](args, console)


if __name__ == "__main__":
    sys.exit(main())
