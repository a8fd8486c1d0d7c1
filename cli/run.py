"""`flywheel run`: run or resume RL iterations, settings from defaults, then --config, then flags.

    flywheel run --config run.toml                                # the main interface
    flywheel run --config run.toml --seed 1 --set train.epochs=4  # a flag or --set over the file
    flywheel run --run-dir runs/demo --iterations 6 --seed 0      # the embedded default

Flags are `FlywheelOptions` (loop/options.py): the settings people change from run to run, and
`--set SECTION.KEY=VALUE` for every key of the config; any standard Beam pipeline option
(--runner, --direct_running_mode, --direct_num_workers, ...) passes through to Beam.
"""

from __future__ import annotations

import argparse
import datetime as dt

from rich.console import Console
from rich.markup import escape

from flywheel.cli.terminal import help_formatter, tell_settings_error, warn_old_flags

RUN_HELP = "run or resume RL iterations on the embedded default"


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

    from flywheel.loop.config_file import read_config_file
    from flywheel.loop.flag_check import unknown_arguments
    from flywheel.loop.options import FlywheelOptions
    given, _ = run_parser().parse_known_args(argv)  # --help; a usage error for a malformed value
    unknown = unknown_arguments(argv)
    if unknown:  # Beam would only log and drop them, and the default job would start
        raise ValueError("\n".join(unknown))
    file = read_config_file(given.config) if given.config else None
    options = pipeline_options(file, argv)
    flywheel = options.view_as(FlywheelOptions)
    try:
        config, explicit = flywheel.run_config(copy.deepcopy(file.values) if file else None,
                                               file.keys if file else set())
    except (KeyError, ValueError) as e:  # a value the file gave: told with its file and line
        raise (ValueError(file.located(e)) if file else e) from None
    return options, config, explicit, flywheel.run_dir or (file.run_dir if file else None)


def pipeline_options(file, argv: list[str]):
    """Beam's options of a run (`flywheel run`, `flywheel eval`): the config file's [beam] values
    (each already checked as the file was read), then the command's flags, which win; the
    DirectRunner unless one is named (not Prism, which needs a download)."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    options = PipelineOptions((file.beam_args if file else []) + argv)
    standard = options.view_as(StandardOptions)
    standard.runner = standard.runner or "DirectRunner"
    return options


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
        return tell_settings_error(console, e)
    warn_old_flags(options)
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


