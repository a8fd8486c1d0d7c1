"""The `flywheel` command line: run, eval, sql, report, status, export, domains, tasks, env, ...

    flywheel run --run-dir runs/demo --iterations 6 --seed 0      # the embedded default
    flywheel run --config run.toml                                # settings from a file
    flywheel status --run-dir runs/demo                           # also while it runs
    flywheel sql "SELECT domain, avg(reward_raw) FROM trajectories GROUP BY 1" --run-dir runs/demo
    flywheel report --run-dir runs/demo --html report.html
    flywheel export --run-dir runs/demo --iteration 3 merged/      # a Hugging Face model folder
    flywheel eval --run-dir runs/demo --n 16 --k 1,4,16           # pass@k, maj@N, best-of-N

`flywheel run` is cli/run.py; the other commands are a module of cli/ each.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flywheel.cli import domains as domains_cli, environments as env_cli, export as export_cli
from flywheel.cli import replay as replay_cli
from flywheel.cli import sandbox as sandbox_cli, tasks as tasks_cli, verify as verify_cli
from flywheel.cli import imports as imports_cli, review as review_cli, serve as serve_cli
from flywheel.cli import sft as sft_cli
from flywheel.cli import run as run_cli
from flywheel.cli.terminal import console_for, help_formatter, quiet_on_closed_pipe

def cmd_sql(args, console: Console) -> int:
    import duckdb
    from flywheel.reports.sql import query
    from flywheel.schemas import SchemaVersionError
    try:
        columns, rows = query(args.run_dir, args.query)
    except (duckdb.Error, SchemaVersionError) as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
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
    from flywheel.reports.report import metric_table
    if args.html:
        from flywheel.reports.html import write_report
        from flywheel.settings.layout import RunLayout
        layout = RunLayout(args.run_dir)
        if not layout.exists(layout.run_json) and not layout.exists(layout.table_dir("evaluations")):
            console.print(f"[red]error:[/] {escape(args.run_dir)} holds no run (no run.json) "
                          "and no evaluations (flywheel eval --out)", highlight=False)
            return 1
        plots = write_report(args.run_dir, args.html)
        console.print(f"wrote {args.html}: " + ", ".join(p.title for p in plots), highlight=False)
        return 0
    console.print(metric_table(args.run_dir, args.metric))
    return 0


def cmd_status(args, console: Console) -> int:
    from flywheel.reports.run_status import run_status, status_lines
    try:
        status = run_status(args.run_dir)
    except FileNotFoundError as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 1
    if args.format == "json":
        print(json.dumps(status))
    else:
        for line in status_lines(status):
            console.print(line, markup=False, highlight=False)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flywheel", description=__doc__.split("\n")[0],
                                formatter_class=help_formatter)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help=run_cli.RUN_HELP, add_help=False)  # parsed by run_parser()
    sub.add_parser("eval", help="evaluate a model or a run's checkpoint: pass@k, maj@N, best-of-N",
                   add_help=False)  # parsed by cli/eval.py
    sql = sub.add_parser("sql", help="run DuckDB SQL over a run's tables")
    sql.add_argument("query")
    sql.add_argument("--run-dir", required=True)
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    report = sub.add_parser("report", help="a metric per domain and iteration (default: held-out pass@1)")
    report.add_argument("--run-dir", required=True)
    report.add_argument("--metric", default="heldout_pass@1",
                        help="a `metrics` name, e.g. train_pass_rate, zero_variance_frac, train/loss")
    report.add_argument("--html", metavar="FILE",
                        help="write a self-contained page of the run's curves (matplotlib) instead")
    status = sub.add_parser("status", help="a run's committed iterations, current stage, last "
                                           "held-out pass@1 and errors (also while it runs)")
    status.add_argument("--run-dir", required=True)
    status.add_argument("--format", choices=("text", "json"), default="text")
    for module in (export_cli, domains_cli, replay_cli, sandbox_cli, tasks_cli, env_cli, verify_cli,
                   imports_cli, serve_cli, review_cli, sft_cli):
        module.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    # Beam's in-process runner talks gRPC while the sandbox forks; gRPC logs every such fork.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    argv = sys.argv[1:] if argv is None else list(argv)
    return quiet_on_closed_pipe(lambda: _dispatch(argv))


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["run"]:
        return run_cli.cmd_run(argv[1:], console_for())
    if argv[:1] == ["eval"]:
        from flywheel.cli import eval as eval_cli
        if "-h" in argv or "--help" in argv:
            eval_cli.eval_help_parser().print_help()
            return 0
        fmt = argv[argv.index("--format") + 1] if "--format" in argv[:-1] else "table"
        return eval_cli.run(argv[1:], console_for(stderr=fmt == "json"))
    args, rest = parser().parse_known_args(argv)
    # machine-readable output goes to stdout alone; messages then go to stderr
    console = console_for(stderr=args.command == "verify"
                          or getattr(args, "format", "table") in ("json", "csv"))
    if rest:
        parser().error(f"unrecognized arguments: {' '.join(rest)}")
    commands = {"sql": cmd_sql, "report": cmd_report, "status": cmd_status, "domains": domains_cli.run,
                "tasks": tasks_cli.run, "env": env_cli.run, "verify": verify_cli.run,
                "export": export_cli.run, "replay": replay_cli.run,
                "sandbox": lambda args, console: sandbox_cli.main(args)}
    extra = {"import": imports_cli.run, "serve": serve_cli.run, "review": review_cli.run,
             "sft": sft_cli.run, "dpo": sft_cli.run}  # sft.py parses both
    args.argv = argv  # a command that relaunches itself (sft/dpo --processes) needs its words
    return (commands.get(args.command) or extra[args.command])(args, console)


if __name__ == "__main__":
    sys.exit(main())
