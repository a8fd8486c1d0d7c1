"""Uneven tool times: does one slow call hold back only its own episode, or the whole batch?

    python bench/uneven_episodes.py [--episodes 16] [--turns 24] [--slow 2] [--sleep 0.5]
                                    [--seed 0] [--rounds 1] [--episode KEY=VALUE ...]
                                    [--python LABEL=PYTHON ...]

--episodes scripted `repo_bugs` episodes of --turns turns each, every turn a millisecond read
(list_files, read_file, search), except that at each turn --slow of the episodes (a different few
each turn, so each sleeps at turns*slow/episodes turns) call `run_shell` with `sleep --sleep`.
The batch runs through the rollout pipeline (pipelines/rollout.py's `run_rollout`, the
DirectRunner in memory: whatever episode stage the checkout has) with the sleeps and without, in
alternating order, each in a process of its own after an untimed warm-up, and the wall time of
each is printed with the difference and the sleeps that ran. Episodes that run
free pay about turns*slow/episodes sleeps each, overlapped; stages in lockstep pay one sleep per
turn, `turns` sleeps in all.

With --python LABEL=PYTHON (repeatable), this script runs itself under each interpreter in turn
(alternating order each round) and prints them side by side: an interpreter whose venv holds
another checkout measures that code on the same episodes, e.g.

    python bench/uneven_episodes.py --python free=python --python lockstep=/work/lockstep-venv/bin/python

It uses only public entry points (run_rollout, the config dataclasses, the domain registry and
tool-call rendering), so one file runs on the code before and after a change. --episode sets an
[episode] setting the checkout may have (e.g. concurrency=16); one it lacks is reported and skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

DOMAIN_NAME = "repo_bugs"


def actions_for(task: dict, episode: int, n: int, turns: int, slow: int, sleep: float) -> list[str]:
    """The episode's `turns` actions: reads, and `sleep` in a shell at the turns where this episode
    is one of the `slow` chosen (episodes t*slow .. t*slow+slow-1, modulo n, at turn t)."""
    from flywheel.domains.tools import ToolCall, render_call
    files = sorted(p for p in task["repo"]["files"] if p.endswith(".py"))
    reads = [("list_files", {}), *(("read_file", {"path": p}) for p in files),
             *(("search", {"pattern": w}) for w in ("def ", "import", "return"))]
    out = []
    for t in range(turns):
        if slow and sleep and (episode - t * slow) % n < slow:
            call = ("run_shell", {"command": f"sleep {sleep:g}"})
        else:
            call = reads[t % len(reads)]
        out.append(render_call(ToolCall(*call)))
    return out


def write_script(path: str, n: int, turns: int, slow: int, sleep: float, seed: int) -> None:
    from flywheel.domains.registry import get_domain
    domain = get_domain(DOMAIN_NAME)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):  # iteration 0's training tasks: indices 0..n-1, as the rollout reads them
            task = domain.make_task("train", i, seed)
            f.write(json.dumps({"prompt": task["prompt"],
                                "actions": actions_for(task, i, n, turns, slow, sleep)}) + "\n")


def episode_settings(turns: int, extra: list[str]):
    """EpisodeSettings(max_turns=turns) with the --episode settings this checkout knows."""
    from flywheel.domains.episode_settings import EpisodeSettings
    settings = EpisodeSettings(max_turns=turns)
    known = {f.name: f for f in dataclasses.fields(EpisodeSettings)}
    for item in extra:
        key, _, value = item.partition("=")
        if key not in known:
            print(f"note: this checkout's [episode] has no `{key}`: left out", file=sys.stderr)
            continue
        kind = type(getattr(settings, key))
        settings = dataclasses.replace(settings, **{key: kind(value) if kind is not bool
                                                    else value.lower() in ("1", "true", "yes")})
    return settings


def batch_seconds(script: str, n: int, turns: int, seed: int, extra: list[str]) -> tuple[float, dict]:
    """Wall time of one rollout of the scripted batch (in-memory DirectRunner), and its episode
    ends."""
    from apache_beam.options.pipeline_options import PipelineOptions
    try:
        from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
        from flywheel.settings.layout import RunLayout
    except ImportError:  # a checkout from before settings/ (the lockstep baseline, e92297c)
        from flywheel.loop.config import PolicySpec, RolloutSettings, RunConfig
        from flywheel.loop.layout import RunLayout
    from flywheel.pipelines.rollout import IterationSpec, run_rollout
    run_dir = tempfile.mkdtemp(prefix="bench-uneven-run-")
    config = RunConfig(seed=seed, policy=PolicySpec("scripted", options=(f"script={script}",)),
                       rollout=RolloutSettings(domains=(DOMAIN_NAME,), tasks_per_domain=n,
                                               heldout_per_domain=0, n_samples=1),
                       episode=episode_settings(turns, extra))
    start = time.perf_counter()
    run_rollout(config, IterationSpec("bench", 0, 0, None), RunLayout(run_dir),
                PipelineOptions(["--runner=DirectRunner"]))
    seconds = time.perf_counter() - start
    rows = RunLayout(run_dir).read_table("trajectories").to_pylist()
    ends: dict[str, int] = {}
    for r in rows:
        ends[f"{r['episode_end']}@{len(r['turns'])}"] = ends.get(f"{r['episode_end']}@{len(r['turns'])}", 0) + 1
    # the sleeps that really ran (a check on the script's replay): shell calls that exited 0
    ends["sleeps run"] = sum((t["observation"] or "").startswith("$ sleep") and "[exit 0]" in
                             (t["observation"] or "") for r in rows for t in r["turns"])
    return seconds, ends


def one_batch(args) -> dict:
    """One timed batch (`args.one`: with or without the sleeps) after an untimed warm-up (imports,
    Beam's first pipeline, the sandbox's first pool) on the same script: its seconds and ends."""
    folder = tempfile.mkdtemp(prefix="bench-uneven-")
    script = os.path.join(folder, "script.jsonl")
    write_script(script, args.episodes, args.turns, args.slow,
                 args.sleep if args.one == "with sleeps" else 0.0, args.seed)
    batch_seconds(script, 1, 2, args.seed, args.episode)
    seconds, ends = batch_seconds(script, args.episodes, args.turns, args.seed, args.episode)
    import flywheel.pipelines
    return {"seconds": seconds, "ends": ends, "code": list(flywheel.pipelines.__path__)[0]}


def measure(args, python: str = sys.executable) -> dict:
    """`python`'s figures: seconds without and with the sleeps, per round (alternating order),
    each batch in a process of its own. (One process per batch: a worker keeps its engine while
    the weights' digest stays the same, and a scripted policy's digest does not name its script,
    so a second script in the same process would replay the first.)"""
    out: dict = {"seconds": {"without sleeps": [], "with sleeps": []}, "ends": {}}
    for r in range(args.rounds):
        for label in (list(out["seconds"]) if r % 2 == 0 else list(out["seconds"])[::-1]):
            done = subprocess.run(
                [python, os.path.abspath(__file__), "--one", label, "--episodes", str(args.episodes),
                 "--turns", str(args.turns), "--slow", str(args.slow), "--sleep", str(args.sleep),
                 "--seed", str(args.seed), *(f"--episode={e}" for e in args.episode)],
                capture_output=True, text=True, cwd=tempfile.gettempdir())
            if done.returncode:
                sys.exit(f"{python} failed:\n{done.stderr[-3000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            out["seconds"][label].append(result["seconds"])
            out["ends"][label], out["code"] = result["ends"], result["code"]
    return out


def compare(args) -> None:
    """Each --python runs `measure` in a child, in alternating order each round; side by side."""
    pythons = [p.split("=", 1) for p in args.python]
    results: dict[str, list[dict]] = {label: [] for label, _ in pythons}
    load = os.getloadavg()
    single = argparse.Namespace(**{**vars(args), "rounds": 1})
    for r in range(args.rounds):
        for label, python in (pythons if r % 2 == 0 else pythons[::-1]):
            results[label].append(measure(single, python))
    print(f"{args.episodes} {DOMAIN_NAME} episodes x {args.turns} turns; at each turn {args.slow} of "
          f"them sleep {args.sleep:g} s in run_shell (a different {args.slow} each turn, "
          f"{args.turns * args.slow / args.episodes:g} sleeps per episode), the rest read; seed "
          f"{args.seed}; {args.rounds} round(s), alternating order; load before "
          f"{' '.join(f'{x:.2f}' for x in load)}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"{'code':<12} {'without sleeps s':>18} {'with sleeps s':>16} {'sleeps cost s':>14}  code at")
    medians = {}
    for label, runs in results.items():
        without = [s for run in runs for s in run["seconds"]["without sleeps"]]
        with_ = [s for run in runs for s in run["seconds"]["with sleeps"]]
        medians[label] = statistics.median(with_)
        print(f"{label:<12} {' '.join(f'{s:.1f}' for s in without):>18} "
              f"{' '.join(f'{s:.1f}' for s in with_):>16} "
              f"{statistics.median(with_) - statistics.median(without):>14.1f}  {runs[0]['code']}")
        print(f"{'':<12} episode ends {runs[-1]['ends']}")
    labels = list(medians)
    for other in labels[1:]:
        print(f"with sleeps, {other} / {labels[0]} (median batch wall time): "
              f"{medians[other] / medians[labels[0]]:.2f}x (issue 41 asks >= 1.5 of lockstep over "
              "free-running)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--slow", type=int, default=2, help="episodes that sleep at each turn")
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds of each slow call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--episode", action="append", default=[], metavar="KEY=VALUE",
                        help="an [episode] setting, where this checkout has it")
    parser.add_argument("--python", action="append", default=[], metavar="LABEL=PYTHON",
                        help="run under each interpreter (its venv's checkout), side by side")
    parser.add_argument("--one", choices=("with sleeps", "without sleeps"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.python:
        compare(args)
        return
    if args.one:
        print(json.dumps(one_batch(args)))
        return
    result = measure(args)
    for label, seconds in result["seconds"].items():
        print(f"{label}: {' '.join(f'{s:.1f}' for s in seconds)} s; ends {result['ends'][label]}")
    print(f"code: {result['code']}")


if __name__ == "__main__":
    main()
