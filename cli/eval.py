"""`flywheel eval`: evaluate a model or a run's checkpoint the same way, on held-out or your own tasks.

    flywheel eval --policy hf --model smollm2 --domains chat_arith,chat_code --out evals/base
    flywheel eval --run-dir runs/demo --iteration 5 --n 16 --k 1,4,16      # into the run's tables
    flywheel eval --tasks humaneval.jsonl --domains python_tests --heldout-per-domain 0 ...
    flywheel eval --policy tiny --domains fix_function --grid max_turns=1,3 --grid n=4,16

`--grid AXIS=V1,V2` (repeatable) evaluates every cell of the grid over n, temperature, max_turns,
max_tool_calls and episode_tokens (the context length), each cell an evaluation of its own name,
then prints them side by side; the HTML report draws them (`flywheel report --html`).

The run's flags (--config, --set SECTION.KEY=VALUE, --domains, --policy, ...) set the evaluation's tasks, policy, sandbox, turns and budgets (the
run's own settings when --run-dir names a run: its checkpoint is what gets evaluated). Its own
flags: --n samples per task at --temperature (plus one greedy), --k for pass@k, --no-self-verify,
--name for the evaluation (default from its settings), --out for a new output dir, --format json.
Prints one table (a row per domain: pass@k, greedy pass@1, maj@N, best-of-N by visible tests, by
self-verification, and the oracle best-of-N), and writes the `evaluations` and `metrics` tables.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json

from rich.console import Console
from rich.markup import escape

from flywheel.cli.terminal import tell_settings_error, warn_old_flags
from flywheel.cli.arg_types import nonnegative_int, positive_int

EVAL_HELP = "evaluate a model or a run's checkpoint: pass@k, maj@N, best-of-N"
DEFAULT_TASKS = 50  # held-out tasks per domain when --heldout-per-domain is not given
GRID_AXES = {"n": int, "temperature": float, "max_turns": int, "max_tool_calls": int,
             "episode_tokens": int}  # an axis of --grid, and its values' type
GRID_KEYS = {"temperature": "rollout.temperature", "max_turns": "episode.max_turns",
             "max_tool_calls": "episode.max_tool_calls", "episode_tokens": "episode.tokens"}


def eval_help_parser() -> argparse.ArgumentParser:
    """eval_parser with the run's flags it shares (--help shows both; parsing takes them apart)."""
    from flywheel.loop.options import add_run_flags
    p = eval_parser()
    add_run_flags(p.add_argument_group("the run's settings (as flywheel run takes them)"),
                  skip=("--run-dir",))
    return p


def eval_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="flywheel eval", description=EVAL_HELP,
                                epilog="Other flags are Beam pipeline options (e.g. --runner).")
    p.add_argument("--run-dir", help="evaluate this run's checkpoint, with its settings, into its tables")
    p.add_argument("--iteration", type=nonnegative_int,
                   help="evaluate the checkpoint iteration K wrote (default: "
                   "the last); its rows land under iteration=K+1, the policy version it is")
    p.add_argument("--out", help="output dir (default: the --run-dir, else evals/<timestamp>)")
    p.add_argument("--n", type=positive_int, default=16, help="sampled answers per task (besides one greedy)")
    p.add_argument("--k", default="1,4,16", help="the k of pass@k, comma-separated (each <= --n)")
    p.add_argument("--no-self-verify", action="store_true", help="do not ask the policy to judge its answers")
    p.add_argument("--name", help="the evaluation's name (default: n, temperature, turns, budget)")
    p.add_argument("--grid", action="append", default=[], metavar="AXIS=V1,V2",
                   help=f"evaluate every cell of a grid over {', '.join(GRID_AXES)} (repeatable)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    return p


def grid_cells(items: list[str]) -> list[dict]:
    """The cells of --grid AXIS=V1,V2 ... ({axis: value} each; one empty cell without --grid);
    ValueError naming a bad axis or value."""
    axes = []
    for item in items:
        axis, _, values = item.partition("=")
        if axis not in GRID_AXES:
            raise ValueError(f"--grid {item!r}: the axis must be one of {', '.join(GRID_AXES)}")
        try:
            axes.append([(axis, GRID_AXES[axis](v)) for v in values.split(",") if v.strip()])
        except ValueError:
            raise ValueError(f"--grid {item!r}: values of {axis} are {GRID_AXES[axis].__name__}s") from None
        if not axes[-1]:
            raise ValueError(f"--grid {item!r}: no values")
    return [dict(cell) for cell in itertools.product(*axes)]


def cell_config(config, cell: dict):
    """`config` with a grid cell's settings (its n is the evaluation's, not the config's)."""
    from flywheel.settings.config import RunConfig
    values = config.to_dict()
    for axis, value in cell.items():
        if axis in GRID_KEYS:
            table, key = GRID_KEYS[axis].split(".")
            values[table][key] = value
    return RunConfig.from_dict(values)


def settings(argv: list[str]):
    """(eval args, Beam options, RunConfig, explicit keys, checkpoint URI or None, output dir,
    iteration) of `flywheel eval ARGV`; ValueError/KeyError say what is wrong."""
    from apache_beam.options.pipeline_options import StandardOptions

    from flywheel.cli.run import pipeline_options, run_parser
    from flywheel.settings.config import RunConfig
    from flywheel.loop.flag_check import unknown_arguments
    from flywheel.settings.layout import RunLayout
    from flywheel.loop.options import FlywheelOptions
    from flywheel.loop.config_file import read_config_file
    args, rest = eval_parser().parse_known_args(argv)
    given, _ = run_parser().parse_known_args(rest)  # a malformed run flag is a usage error here too
    file = read_config_file(given.config) if given.config else None  # ConfigFileError: a ValueError
    if file and args.run_dir:
        raise ValueError("--config and --run-dir: give one (a run's settings are its run.json)")
    unknown = unknown_arguments(rest)
    if unknown:
        raise ValueError("\n".join(unknown))
    if args.n < 1:
        raise ValueError(f"--n must be >= 1, got {args.n}")
    options = pipeline_options(file, rest)
    base, checkpoint, iteration = None, None, args.iteration or 0
    if args.run_dir:
        layout = RunLayout(args.run_dir)
        if not layout.exists(layout.run_json):
            raise ValueError(f"--run-dir {args.run_dir}: no run.json there (not a flywheel run)")
        base = layout.read_json(layout.run_json)["config"]
        committed = layout.committed_iterations()
        if not committed:
            raise ValueError(f"--run-dir {args.run_dir}: no committed iteration, no checkpoint yet")
        iteration = committed[-1] if args.iteration is None else args.iteration
        if iteration not in committed:
            raise ValueError(f"--iteration {iteration}: the run has committed {committed}")
        checkpoint = layout.checkpoint(iteration)
        iteration += 1  # recorded as the policy version it is, as --eval-every records it
    try:
        config, explicit = options.view_as(FlywheelOptions).run_config(
            file.values if file else base, file.keys if file else set())
    except (KeyError, ValueError) as e:  # a value the file gave: told with its file and line
        raise (ValueError(file.located(e)) if file else e) from None
    if base is None and "rollout.heldout_per_domain" not in explicit:
        config = RunConfig.from_dict({**config.to_dict(), "rollout": {
            **config.to_dict()["rollout"], "heldout_per_domain": DEFAULT_TASKS}})
    from flywheel.loop.preflight import setup_problems
    problems = setup_problems(config, options.view_as(StandardOptions).runner)
    if problems:  # every attempt of these domains would be an environment error row
        raise ValueError("\n".join(problems))
    out = args.out or args.run_dir or f"evals/{dt.datetime.now():%Y%m%d-%H%M%S}"
    return args, options, config, checkpoint, out, iteration


def ks_of(text: str, n: int) -> list[int]:
    """The k of --k, each a positive integer; those above n dropped (said on screen)."""
    try:
        ks = sorted({int(k) for k in text.split(",") if k.strip()})
    except ValueError:
        raise ValueError(f"--k {text!r}: expected comma-separated integers, e.g. 1,4,16") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--k {text!r}: each k must be >= 1")
    return ks


def default_name(config, n: int, temperature: float) -> str:
    e = config.episode
    return f"n={n},t={temperature:g},turns={e.max_turns},calls={e.max_tool_calls},tokens={e.tokens}"


def run(argv: list[str], console: Console) -> int:
    from flywheel.pipelines.evaluation import EvalSpec, evaluate
    from flywheel.settings.layout import RunLayout
    from flywheel.pipelines.eval_stats import render_table
    try:
        args, options, config, checkpoint, out, iteration = settings(argv)
        ks = ks_of(args.k, args.n)
    except (KeyError, ValueError) as e:
        return tell_settings_error(console, e)
    warn_old_flags(options)
    try:
        cells = grid_cells(args.grid) or [{}]
    except ValueError as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    what = f"checkpoint {checkpoint}" if checkpoint else f"{config.policy.backend} policy as it is"
    run_id = RunLayout(out).root.rstrip("/").rsplit("/", 1)[-1]
    results = []
    for number, cell in enumerate(cells, 1):
        cfg, n = cell_config(config, cell), cell.get("n", args.n)
        name = ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in cell.items())
        spec = EvalSpec(name=args.name or name or default_name(cfg, n, cfg.rollout.temperature),
                        run_id=run_id, iteration=iteration, checkpoint_uri=checkpoint, n=n,
                        temperature=cfg.rollout.temperature, self_verify=not args.no_self_verify)
        if args.name and len(cells) > 1:
            spec = EvalSpec(**{**spec.__dict__, "name": f"{args.name}:{name}"})
        console.print(f"[bold]flywheel eval[/] {escape(spec.name)} ({number}/{len(cells)}): "
                      f"{escape(what)} -> {escape(out)}")
        summaries = evaluate(cfg, spec, RunLayout(out), ks=[k for k in ks if k <= n], options=options)
        results.append({"evaluation": spec.name, "cell": cell, "summaries": summaries})
        if args.format != "json":
            table = render_table(summaries)
            table.title = spec.name
            console.print(table)
    if args.format == "json":
        print(json.dumps({"out": out, "iteration": iteration, "evaluations": results}))
    else:
        if len(results) > 1:
            console.print(grid_table(results))
        console.print("Compare with SQL, e.g.:\n  flywheel sql \"SELECT evaluation, domain, avg((verdict = "
                      f"'pass')::int) FROM evaluations WHERE greedy GROUP BY ALL\" --run-dir {escape(out)}")
    return 0


def grid_table(results: list[dict]):
    """One row per grid cell and domain: greedy pass@1, pass@1 and the oracle best-of-N."""
    from rich.table import Table
    table = Table(title="ablation grid")
    for column in ("evaluation", "domain", "greedy pass@1", "pass@1", "oracle best-of-N"):
        table.add_column(column, justify="left" if column in ("evaluation", "domain") else "right")
    for result in results:
        for s in result["summaries"]:
            oracle = next((v for k, v in s.items() if k.startswith("oracle_best_of_")), None)
            table.add_row(result["evaluation"], s["domain"],
                          *(f"{v:.3f}" if v is not None else "n/a"
                            for v in (s.get("greedy_pass@1"), s.get("pass@1"), oracle)))
    return table
