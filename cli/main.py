"""The `flywheel` command line: run, eval, sql, report, status, export, domains, tasks, env, ...

    flywheel run --run-dir runs/demo --iterations 6 --seed 0      # the embedded default
    flywheel run --config run.toml                                # settings from a file
    flywheel status --run-dir runs/demo                           # also while it runs
    flywheel sql "SELECT domain, avg(reward_raw) FROM trajectories GROUP BY 1" --run-dir runs/demo
    flywheel report --run-dir runs/demo --html report.html
    flywheel export --run-dir runs/demo --iteration 3 merged/      # a Hugging Face model folder
    flywheel eval --run-dir runs/demo --n 16 --k 1,4,16           # pass@k, maj@N, best-of-N

`flywheel run` takes its settings as `FlywheelOptions` (loop/options.py) beside any standard
Beam pipeline option (--runner, --direct_running_mode, --direct_num_workers, ...).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
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
from flywheel.cli.terminal import PIPE_WIDTH, console_for, quiet_on_closed_pipe

RUN_HELP = "run or resume RL iterations on the embedded default"


def help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help, wrapped only on a terminal: in a pipe each option's help is one line
    (a wrap would also split names such as unsafe-subprocess at the hyphen)."""
    return argparse.HelpFormatter(prog, width=None if sys.stdout.isatty() else PIPE_WIDTH)


def run_parser() -> argparse.ArgumentParser:
    """`flywheel run`'s own flags (FlywheelOptions'), for --help; Beam's options pass through.

    Built only for `run`, so that the other commands start without importing Beam and torch.
    """
    from flywheel.loop.options import FlywheelOptions
    p = argparse.ArgumentParser(prog="flywheel run", description=RUN_HELP,
                                epilog="Other flags are Beam pipeline options (e.g. --runner).",
                                formatter_class=help_formatter)
    FlywheelOptions._add_argparse_args(p)
    return p


def run_settings(argv: list[str]):
    """(Beam options, RunConfig, explicitly given keys, run dir or None) of `flywheel run ARGV`:
    defaults, then the --config file, then the flags. ValueError/KeyError name what is wrong."""
    import copy

    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    from flywheel.loop.config_file import read_config_file
    from flywheel.loop.flag_check import unknown_arguments
    from flywheel.loop.options import FlywheelOptions
    given, _ = run_parser().parse_known_args(argv)  # --help; a usage error for a malformed value
    unknown = unknown_arguments(argv)
    if unknown:  # Beam would only log and drop them, and the default job would start
        raise ValueError("\n".join(unknown))
    file = read_config_file(given.config) if given.config else None
    wrong = unknown_arguments(file.beam_args) if file else []
    if wrong:  # a [beam] value Beam's parser refuses, e.g. a choice it does not have
        raise ValueError("\n".join(f"{given.config}: [beam]: {message}" for message in wrong))
    options = PipelineOptions((file.beam_args if file else []) + argv)
    standard = options.view_as(StandardOptions)
    standard.runner = standard.runner or "DirectRunner"  # not Prism, which needs a download
    flywheel = options.view_as(FlywheelOptions)
    try:
        config, explicit = flywheel.run_config(copy.deepcopy(file.values) if file else None,
                                               file.keys if file else set())
    except (KeyError, ValueError) as e:  # a value the file gave: told with its file and line
        raise (ValueError(file.located(e)) if file else e) from None
    return options, config, explicit, flywheel.run_dir or (file.run_dir if file else None)


def beam_settings(options) -> dict:
    """The Beam pipeline options given (from the file or flags), without Flywheel's own."""
    from flywheel.loop.options import FlywheelOptions
    ours = set(FlywheelOptions(flags=[]).get_all_options(current_only=True))
    return {k: v for k, v in options.get_all_options(drop_default=True).items() if k not in ours}


def cmd_run(argv: list[str], console: Console) -> int:
    """`flywheel run ARGV`: ARGV holds Flywheel's flags and any Beam pipeline options."""
    from flywheel.loop.config_file import config_toml
    try:  # settings first: a mistake in them is told before the pipeline's imports
        options, config, explicit, run_dir = run_settings(argv)
    except (KeyError, ValueError) as e:
        for line in str(e.args[0] if isinstance(e, KeyError) else e).splitlines():
            console.print(f"[red]error:[/] {escape(line)}", highlight=False)
        return 2
    from flywheel.loop.options import FlywheelOptions
    if options.view_as(FlywheelOptions).print_config:
        print(config_toml(config.to_dict(), run_dir, beam_settings(options)), end="")
        return 0
    from flywheel.loop.driver import RunConfigMismatch, run_iterations
    from flywheel.policy.checkpoint import CheckpointDigestError
    from flywheel.trainer.train import StalePolicyError
    from flywheel.cli.progress import RunProgress
    from flywheel.reports.report import metric_table
    from flywheel.cli.run_log import RunLog
    from flywheel.reports.run_status import StageRecorder
    from apache_beam.options.pipeline_options import StandardOptions
    from flywheel.loop.preflight import setup_problems
    problems = setup_problems(config, options.view_as(StandardOptions).runner)
    for line in problems:  # every attempt of these domains would be an environment error row
        console.print(f"[red]error:[/] {escape(line)}", highlight=False)
    if problems:
        return 2
    run_dir = run_dir or f"runs/{dt.datetime.now():%Y%m%d-%H%M%S}"
    with RunLog(run_dir) as log:
        show = log.tee(console)
        show(f"[bold]flywheel run[/] -> run dir [cyan]{escape(run_dir)}[/]")
        try:
            with RunProgress(console, run_dir, log) as progress:
                stages = StageRecorder(run_dir)
                run_iterations(run_dir, config, explicit=explicit, options=options,
                               event=lambda name, data: (stages.event(name, data),
                                                         progress.event(name, data)))
        except (RunConfigMismatch, StalePolicyError, CheckpointDigestError) as e:
            show(f"[red]error:[/] {escape(str(e))}", highlight=False)  # the run's data, not a bug
            return 2
        except KeyboardInterrupt:  # Ctrl-C: no traceback; committed iterations are kept
            show(f"interrupted: resume with flywheel run --run-dir {escape(run_dir)}")
            return 130
        show(metric_table(run_dir))
        show("Look further with SQL, e.g.:\n  flywheel sql \"SELECT domain, avg(reward_raw), "
             f"count(*) FROM trajectories GROUP BY 1\" --run-dir {escape(run_dir)}")
    return 0


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
        from flywheel.loop.layout import RunLayout
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
    sub.add_parser("run", help=RUN_HELP, add_help=False)  # parsed by run_parser()
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
        return cmd_run(argv[1:], console_for())
    if argv[:1] == ["eval"]:
        from flywheel.cli import eval as eval_cli
        if "-h" in argv or "--help" in argv:
            eval_cli.eval_parser().print_help()
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
    return (commands.get(args.command) or extra[args.command])(args, console)


if __name__ == "__main__":
    sys.exit(main())
