"""`flywheel replay`: re-execute an episode's recorded tool calls in fresh sandboxes and compare.

    flywheel replay --run-dir runs/r 2/fix_function-train-000007/3      # ITERATION/TASK_ID/SAMPLE

Each turn's recorded action is parsed again, its tool run from the state the replay has reached,
and the new observation (cut as the run cut it) printed beside the recorded one. The exit status
is 0 when every observation matches, 1 when one differs (the environment is not deterministic
for this task, or the record does not describe what ran), 2 when the trajectory cannot be found
or the run's sandbox backend needs your say-so. The task comes from its domain's generator (the
run's seed) or from the run's task files.

A run directory may come from someone else, and what it records is model output. It chooses the
sandbox only among backends that isolate that code on this machine (RUN_MAY_CHOOSE); for any
other (`unsafe-subprocess` isolates nothing; `remote` sends the episode, and your sandbox token,
to the servers the run names; a plugin this list does not know) the replay runs nothing until
the backend is named on the command line: `--sandbox local` to replay isolated, or `--sandbox
unsafe-subprocess` to accept what the run chose.
"""

from __future__ import annotations

import re

from rich.markup import escape

from flywheel.loop.run_sandbox import RUN_MAY_CHOOSE, not_for_a_run_to_choose

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Beam is imported when a replay runs, not for `flywheel --help`
    from flywheel.settings.layout import RunLayout

_GENERATED = re.compile(r"^(?P<domain>.+)-(?P<split>train|heldout)-(?P<index>\d+)$")



class ReplayError(ValueError):
    """The trajectory or its task cannot be found; the message says what was looked for."""


def add_parser(sub) -> None:
    p = sub.add_parser("replay", help="re-run an episode's tool calls in fresh sandboxes and "
                                      "check each observation against the record")
    p.add_argument("--run-dir", required=True, help="the run (local path or gs://...)")
    p.add_argument("trajectory", metavar="TRAJECTORY_ID", help="ITERATION/TASK_ID/SAMPLE_INDEX")
    p.add_argument("--sandbox", default=None,
                   help="sandbox backend (default: the run's, if it is one of "
                        f"{', '.join(RUN_MAY_CHOOSE)}; any other must be named here)")
    p.add_argument("--sandbox-options", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the --sandbox backend (repeatable)")


def run_backend(args, rollout) -> tuple[str, dict]:
    """(backend name, options) to replay with: the command line's, else the run's when the run
    may choose it (RUN_MAY_CHOOSE); else ReplayError saying how to name one."""
    from flywheel.settings.option_items import parse_options
    if args.sandbox:
        try:
            return args.sandbox, parse_options(tuple(args.sandbox_options), "--sandbox-options")
        except ValueError as e:
            raise ReplayError(str(e)) from None
    if args.sandbox_options:
        raise ReplayError("--sandbox-options needs --sandbox: options of which backend?")
    name = rollout.sandbox
    if why := not_for_a_run_to_choose(name):
        raise ReplayError(
            f"the run's sandbox backend {name!r} {why}; this run directory cannot choose it for "
            f"you. Replay isolated with --sandbox local, or name the run's backend yourself if "
            f"you trust this run and what its policy wrote: --sandbox {name}")
    return name, parse_options(rollout.sandbox_options)


def parse_id(text: str) -> tuple[int, str, int]:
    iteration, _, rest = text.partition("/")
    task_id, _, sample = rest.rpartition("/")
    if not (iteration.isdigit() and sample.isdigit() and task_id):
        raise ReplayError(f"trajectory id {text!r} is not ITERATION/TASK_ID/SAMPLE_INDEX")
    return int(iteration), task_id, int(sample)


def find_row(layout: RunLayout, iteration: int, task_id: str, sample: int) -> dict:
    import pyarrow.compute as pc
    table = layout.read_table("trajectories", filter=(pc.field("iteration") == iteration)
                              & (pc.field("task_id") == task_id) & (pc.field("sample_index") == sample))
    if table.num_rows == 0:
        raise ReplayError(f"no trajectory {iteration}/{task_id}/{sample} in {layout.root} "
                          "(held-out attempts are not stored; see `flywheel sql`)")
    return table.to_pylist()[0]


def find_task(config, row: dict) -> dict:
    from flywheel.domains.registry import get_domain
    from flywheel.cli.tasks import load_tasks
    generated = _GENERATED.match(row["task_id"])
    if generated and generated["domain"] == row["domain"] and get_domain(row["domain"]).task_count() != 0:
        task = get_domain(row["domain"]).make_task(generated["split"], int(generated["index"]), config.seed)
        if task["prompt"] == row["prompt"]:
            return task
    tasks, _ = load_tasks(list(config.rollout.task_files))
    for task in tasks:
        if task["task_id"] == row["task_id"] and task["domain"] == row["domain"]:
            return task
    raise ReplayError(f"task {row['task_id']} is neither generated by domain {row['domain']} "
                      f"with the run's seed nor in its task files {list(config.rollout.task_files)}")


def replay_turns(task: dict, turns: list[dict], backend, observation_chars: int):
    """Yield (turn number, tool, recorded observation, replayed observation) per turn, each action
    taken as the Turn stage takes it: one `EpisodeDomain.step` through the tool runner (total over
    what the model wrote and what its program printed)."""
    from flywheel.domains.registry import get_domain
    from flywheel.domains.tool_runner import ToolRunner, cut_output
    domain, runner = get_domain(task["domain"]), ToolRunner(backend)
    state = domain.start_state(task)
    for number, turn in enumerate(turns, 1):
        step = domain.step(task, state, turn["action"], runner)
        state = step.state
        yield (number, step.call.name if step.call else None, turn["observation"],
               cut_output(step.observation, observation_chars)[0])


def run(args, console) -> int:
    from flywheel.settings.config import RunConfig
    from flywheel.sandbox import get_backend
    from flywheel.settings.layout import RunLayout
    layout = RunLayout(args.run_dir)
    try:
        iteration, task_id, sample = parse_id(args.trajectory)
        if not layout.exists(layout.run_json):
            raise ReplayError(f"no run at {args.run_dir} (no run.json)")
        config = RunConfig.from_dict(layout.read_json(layout.run_json)["config"])
        backend_name, backend_options = run_backend(args, config.rollout)
        row = find_row(layout, iteration, task_id, sample)
        if row["episode_end"] is None:
            raise ReplayError(f"{args.trajectory} is a single-turn attempt: nothing to replay")
        task = find_task(config, row)
    except ValueError as e:  # ReplayError, or a run.json key that moved
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 2
    backend = get_backend(backend_name, **backend_options)
    differ = 0
    try:
        for number, tool, recorded, replayed in replay_turns(task, row["turns"], backend,
                                                             config.episode.observation_chars):
            same = recorded == replayed
            differ += not same
            console.print(f"turn {number} [bold]{tool or 'malformed call'}[/] "
                          f"{'[green]same[/]' if same else '[red]DIFFERS[/]'}", highlight=False)
            console.print(f"  action:   {escape(row['turns'][number - 1]['action'])}", highlight=False)
            console.print(f"  recorded: {escape(str(recorded))}", highlight=False)
            if not same:
                console.print(f"  replayed: {escape(replayed)}", highlight=False)
    finally:
        backend.close()
    console.print(f"{len(row['turns'])} turns, {differ} differ; episode ended: {row['episode_end']}",
                  highlight=False)
    return 1 if differ else 0
