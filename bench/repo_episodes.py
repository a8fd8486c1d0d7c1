"""Repository episodes of 32 turns: what each call costs in the sandbox, and episodes/s.

    python bench/repo_episodes.py [--part cost|speed|contexts|all] [--tasks 8] [--episodes 16]
                                  [--turns 32] [--budget 12000] [--seed 0]
                                  [--workers 1,2,4] [--rounds 1] [--one-at-a-time]
    python bench/repo_episodes.py --part model [--model smollm2] [--tasks 4] [--turns 8]
                                  [--context anchored] [--model-budget 0] [--model-context 2048]

Every episode replays a script through the `scripted` policy or the domain's step directly: the
task's golden trajectory (search, read, edit, run the tests, submit) after exploring calls
(list, read each module, search, run the tests) that pad it to exactly --turns turns.

cost: each call of --tasks such episodes through `repo_bugs`' step on the local sandbox (warm
pool), timed by kind (read: list/read/search; edit; test: run_visible_tests), beside the same harness
with the same plan run as a plain subprocess in a temp dir (no sandbox: the baseline); and the
tree's rebuild from snapshot + changes inside each call (the harness's own clock). Median and p95.

speed: --episodes episodes, side by side in one process (--rounds times, in alternating order):
the plain turn-batched loop (all live episodes sampled in one call per turn, tools 4 at a time:
the baseline), the same loop scoring each episode as it ends (its answer run in the sandbox, the
work the pipeline does besides the turns), and the rollout pipeline (pipelines/rollout.py, whatever episode stage the checkout
has) on the DirectRunner in-memory and under multi_processing with each of --workers. Prints
episodes/s, Beam in-memory / the loop and N workers / 1 worker, each Beam run's sandbox tallies
(uid leases, ms waited for one, servers started), whether the Beam runs' tables are identical
(bench/same_tables.py's rule), and the pipeline's transform count for 2, 32 and 200 turns.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.policy.rollout_engine import engine_for

DOMAIN_NAME = "repo_bugs"
KINDS = {"list_files": "read", "read_file": "read", "search": "read", "edit_file": "edit",
         "run_visible_tests": "test"}


def padded_calls(task: dict, turns: int) -> list[dict]:
    """Exploring calls, then the golden trajectory: `turns` calls in all (golden alone if longer)."""
    golden = task["golden"]
    files = sorted(p for p in task["repo"]["files"] if p.endswith(".py"))
    explore = [{"name": "list_files", "arguments": {}}, {"name": "run_visible_tests", "arguments": {}}]
    explore += [{"name": "read_file", "arguments": {"path": p}} for p in files]
    explore += [{"name": "search", "arguments": {"pattern": word}} for word in ("def ", "import", "return")]
    pad = [explore[i % len(explore)] for i in range(max(0, turns - len(golden)))]
    return pad + golden


def tasks(count: int, seed: int) -> list[dict]:
    from flywheel.domains.registry import get_domain
    domain = get_domain(DOMAIN_NAME)
    return [domain.make_task("train", i, seed) for i in range(count)]


def write_script(path: str, drawn: list[dict], turns: int) -> None:
    from flywheel.domains.tools import ToolCall, render_call
    with open(path, "w", encoding="utf-8") as f:
        for task in drawn:
            actions = [render_call(ToolCall(c["name"], c["arguments"])) for c in padded_calls(task, turns)]
            f.write(json.dumps({"prompt": task["prompt"], "actions": actions}) + "\n")


def plain_call(request, python: str) -> float:
    """The same harness and plan as a plain subprocess in a temp dir, on the sandbox's own
    interpreter (`python`): ms."""
    with tempfile.TemporaryDirectory() as folder:
        for name, text in request.files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(text)
        start = time.perf_counter()
        subprocess.run([python, "-I", "-B", *request.command[1:]], input=request.stdin,
                       cwd=folder, capture_output=True, text=True, timeout=60)
        return (time.perf_counter() - start) * 1000


def cost(n_tasks: int, turns: int, seed: int, console: Console) -> None:
    from flywheel.domains.registry import get_domain
    from flywheel.domains.report_channel import harness_report
    from flywheel.families.repository.repo import REPORT_MARKER
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.domains.tools import ToolCall, render_call
    from flywheel.sandbox import get_backend
    domain = get_domain(DOMAIN_NAME)
    times: dict[str, dict[str, list[float]]] = {}
    with get_backend("local") as backend:
        runner = ToolRunner(backend)
        for task in tasks(n_tasks, seed):
            state = domain.start_state(task)
            for call in padded_calls(task, turns):
                kind = KINDS.get(call["name"])
                tool = ToolCall(call["name"], call["arguments"])
                request = domain.tool_request(task, state, tool) if kind else None
                start = time.perf_counter()
                step = domain.step(task, state, render_call(tool), runner)
                if kind:
                    row = times.setdefault(kind, {"sandbox": [], "plain": [], "rebuild": []})
                    row["sandbox"].append((time.perf_counter() - start) * 1000)
                    row["plain"].append(plain_call(request, backend._python))
                    report = harness_report(step.result, REPORT_MARKER)[0] or {}
                    row["rebuild"].append(report.get("rebuild_ms", float("nan")))
                state = step.state
    table = Table(title=f"{n_tasks} {DOMAIN_NAME} episodes x {turns} turns: ms per call "
                        "(median / p95), local sandbox vs the same harness as a plain subprocess")
    for column in ("call", "n", "sandbox", "plain subprocess", "ratio (median)", "tree rebuild"):
        table.add_column(column, justify="right")
    for kind, row in sorted(times.items()):
        s, p, r = (sorted(row[k]) for k in ("sandbox", "plain", "rebuild"))
        table.add_row(kind, str(len(s)), f"{_med(s):.1f} / {_p95(s):.1f}", f"{_med(p):.1f} / {_p95(p):.1f}",
                      f"{_med(s) / _med(p):.2f}x", f"{_med(r):.2f} / {_p95(r):.2f}")
    console.print(table)


def _med(values):
    return statistics.median(values)


def _p95(values):
    return values[min(len(values) - 1, int(0.95 * len(values)))]


def episodes_of(drawn: list[dict], turns: int, seed: int):
    from flywheel.domains.registry import get_domain
    from flywheel.transforms.expand import expand_task
    from flywheel.transforms.turn import start_episode
    attempts = [a for t in drawn for a in expand_task(
        t, run_id="bench", iteration=0, policy_version=0, seed=seed, n_samples=1,
        temperature=1.0, mode="train")]
    get_domain(DOMAIN_NAME)
    return [start_episode(a, EpisodeSettings(max_turns=turns)) for a in attempts]


WAYS = ("turn-batched loop", "turn-batched loop + scoring", "Beam in-memory")  # then "Beam multi_processing xN"


def speed(n: int, turns: int, seed: int, console: Console, workers: tuple[int, ...] = (1, 2, 4),
          rounds: int = 1, one_at_a_time_too: bool = False) -> None:
    """The plain turn-batched loop (the baseline) beside the rollout's Beam path in-memory and under
    multi_processing with each of `workers`, `rounds` times in alternating order; then the
    ratios, the Beam runs' tables compared and their sandbox tallies (uid leases, waits)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from episodes import one_at_a_time, turn_batched
    from same_tables import compare
    from flywheel.sandbox import get_backend
    from flywheel.policy.backends import create_policy
    drawn = tasks(n, seed)
    folder = tempfile.mkdtemp(prefix="bench-repo-")
    script = os.path.join(folder, "script.jsonl")
    write_script(script, drawn, turns)
    policy = create_policy("scripted", {"script": script}, seed)
    ways = [*(["one at a time"] if one_at_a_time_too else []), *WAYS,
            *(f"Beam multi_processing x{w}" for w in workers)]
    seconds: dict[str, list[float]] = {w: [] for w in ways}
    solved, tallies, run_dirs = {}, {}, {}
    load = os.getloadavg()
    for r in range(rounds):
        for way in (ways if r % 2 == 0 else ways[::-1]):
            start = time.perf_counter()
            if way in ("one at a time", "turn-batched loop", "turn-batched loop + scoring"):
                loop = one_at_a_time if way == "one at a time" else turn_batched
                extra = {"score": True} if way.endswith("scoring") else {}
                with get_backend("local") as backend:
                    done = loop(policy, episodes_of(drawn, turns, seed), backend, **extra)
                solved[way] = sum(a.episode_end == "submitted" for a in done)
            else:
                beam_args = [] if way == "Beam in-memory" else [
                    "--direct_running_mode=multi_processing",
                    f"--direct_num_workers={way.rsplit('x', 1)[1]}"]
                run_dir, result = beam_rollout(folder, f"{way.split()[-1]}-{r}", script, n, turns,
                                               seed, beam_args)
                run_dirs.setdefault(way, run_dir)
                tallies.setdefault(way, sandbox_tallies(result))
            seconds[way].append(time.perf_counter() - start)
    table = Table(title=f"{n} {DOMAIN_NAME} episodes of {turns} turns, scripted policy, local "
                        f"sandbox, {rounds} round(s) in alternating order (load before: "
                        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    for column in ("way", "episodes/s (each round)", "median", "vs turn-batched loop"):
        table.add_column(column, justify="right")
    rate = {w: statistics.median(n / s for s in seconds[w]) for w in ways}
    base = rate["turn-batched loop"]
    for way in ways:
        table.add_row(way, " ".join(f"{n / s:.2f}" for s in seconds[way]), f"{rate[way]:.2f}",
                      f"{rate[way] / base:.2f}x")
    console.print(table)
    console.print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
                  f"on {os.cpu_count()} cores")
    console.print(f"Beam in-memory / turn-batched loop: {rate['Beam in-memory'] / base:.2f}x "
                  "(issue 41 asks >= 1.0); / the loop that also scores each ended episode (the "
                  f"same work as the pipeline's): {rate['Beam in-memory'] / rate['turn-batched loop + scoring']:.2f}x")
    if 1 in workers:
        for w in workers:
            if w != 1:
                console.print(f"multi_processing {w} workers / 1 worker: "
                              f"{rate[f'Beam multi_processing x{w}'] / rate['Beam multi_processing x1']:.2f}x"
                              + (" (issue 41 asks >= 1.6)" if w == 2 else ""))
    if solved:
        console.print(f"plain loops, episodes submitted of {n}: {solved}")
    leases = Table(title="sandbox tallies of each Beam run (its first round; counters "
                         "sandbox_*, summed over workers)")
    for column in ("way", *TALLIES.values()):
        leases.add_column(column, justify="right")
    for way, found in tallies.items():
        leases.add_row(way, *(f"{found.get(t, 0):,.0f}" for t in TALLIES))
    console.print(leases)
    first, *others = run_dirs.items()
    for way, run_dir in others:
        console.print(f"tables, {first[0]} vs {way} (bench/same_tables.py):")
        print("identical" if compare(Path(first[1]), Path(run_dir)) else "NOT IDENTICAL", flush=True)
    transform_counts(seed, script, console)


TALLIES = {"sandbox_uid_leases": "uid leases", "sandbox_uid_wait_ms": "ms waited for a uid",
           "sandbox_uids_held_peak": "uids held (peak)", "sandbox_servers_started": "servers started",
           "sandbox_pools_opened": "pools opened"}


def sandbox_tallies(result) -> dict[str, float]:
    """The run's `sandbox_*` counters (transforms/execute.py report_usage: each worker's sandbox
    tallies, summed; a peak summed over workers is the most they could have held at once)."""
    found: dict[str, float] = {}
    for c in result.metrics().query()["counters"]:
        if c.key.metric.name.startswith("sandbox_"):
            found[c.key.metric.name] = found.get(c.key.metric.name, 0) + c.committed
    return found


def transform_counts(seed: int, script: str, console: Console) -> None:
    """The rollout pipeline's transforms (all, and the leaves that run) for 2, 32 and 200 turns."""
    import apache_beam as beam
    from flywheel.settings.layout import RunLayout
    from flywheel.pipelines.rollout import IterationSpec, Rollout
    counts = []
    for turns in (2, 32, 200):
        pipeline = beam.Pipeline()
        _ = pipeline | "Rollout" >> Rollout(rollout_config(script, 1, turns, seed),
                                            IterationSpec("bench", 0, 0, None),
                                            RunLayout(tempfile.mkdtemp(prefix="bench-graph-")))
        transforms = pipeline.to_runner_api().components.transforms.values()
        leaves = sum(not t.subtransforms for t in transforms)
        counts.append(f"{turns} turns: {len(transforms)} transforms ({leaves} leaves)")
    console.print("rollout pipeline of one repository domain: " + "; ".join(counts))


def contexts(n: int, turns: int, seed: int, budget: int, console: Console) -> None:
    """The ablation: each context strategy over the same scripted episodes under one token budget."""
    from flywheel.domains.registry import get_domain
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.sandbox import get_backend
    from flywheel.policy.backends import create_policy
    from flywheel.transforms.turn import act, end_episode, generate_turn_batch, start_episode, with_sample
    from flywheel.verifiers import get_verifier
    domain, verify = get_domain(DOMAIN_NAME), get_verifier("repo_tests")
    drawn = tasks(n, seed)
    script = os.path.join(tempfile.mkdtemp(prefix="bench-repo-"), "script.jsonl")
    write_script(script, drawn, turns)
    policy = create_policy("scripted", {"script": script}, seed)
    table = Table(title=f"{n} {DOMAIN_NAME} episodes of {turns} scripted turns under a budget of "
                        f"{budget} tokens per context: each context strategy")
    for column in ("context", "solved", "ended on budget", "segments / episode",
                   "tokens read / episode", "summary ids / episode", "longest context"):
        table.add_column(column, justify="right")
    with get_backend("local") as backend:
        runner = ToolRunner(backend)
        for strategy in ("full", "cut", "anchored", "summarize"):
            settings = EpisodeSettings(max_turns=turns, tokens=budget, context=strategy, keep_turns=4)
            live = [start_episode(a, settings) for a in episodes_of(drawn, turns, seed)]
            done = []
            while live:
                sampled = [with_sample(a, f) for a, f in zip(live, generate_turn_batch(policy, live, engine_for(policy, local=True), settings))]
                acted = [act(a, runner, settings)[0] for a in sampled]
                done += [a for a in acted if a.episode.end]
                live = [a for a in acted if not a.episode.end]
            solved = contexts_seen = longest = budget_ends = summary_ids = 0
            for attempt in done:
                ended = end_episode(attempt)
                task = next(t for t in drawn if t["task_id"] == attempt.task_id)
                solved += verify(task, ended.response, domain.run(backend, task, ended.response)).reward
                seen = [*attempt.segments, {"prompt_token_ids": attempt.prompt_token_ids,
                                            "response_token_ids": attempt.response_token_ids}]
                contexts_seen += sum(len(s["prompt_token_ids"]) + len(s["response_token_ids"]) for s in seen)
                longest = max([longest, *(len(s["prompt_token_ids"]) + len(s["response_token_ids"]) for s in seen)])
                budget_ends += attempt.episode.end == "budget"
                summary_ids += sum(len(policy.encode_response(s["summary"])) - 1 for s in attempt.segments
                                   if s.get("summary") is not None)
            table.add_row(strategy, f"{solved:.0f}/{n}", str(budget_ends),
                          f"{sum(1 + len(a.segments) for a in done) / n:.2f}",
                          f"{contexts_seen / n:,.0f}", f"{summary_ids / n:,.0f}", f"{longest:,}")
    console.print(table)


def model(n: int, turns: int, seed: int, name: str, context: str, console: Console,
          budget: int = 0, model_context: int = 2048) -> None:
    """A real model on repository episodes through the Beam rollout: well-formed calls, solved."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
    from flywheel.settings.layout import RunLayout
    from flywheel.pipelines.rollout import IterationSpec, run_rollout
    run_dir = tempfile.mkdtemp(prefix="bench-repo-model-")
    config = RunConfig(seed=seed, policy=PolicySpec("hf", model=name, options=(f"context={model_context}",)),
                       rollout=RolloutSettings(domains=(DOMAIN_NAME,), tasks_per_domain=n,
                                               heldout_per_domain=0, n_samples=2),
                       episode=EpisodeSettings(max_turns=turns, context=context, observation_chars=1500,
                                               tokens=budget))
    start = time.perf_counter()
    run_rollout(config, IterationSpec("bench", 0, 0, None), RunLayout(run_dir),
                PipelineOptions(["--runner=DirectRunner"]))
    seconds = time.perf_counter() - start
    rows = RunLayout(run_dir).read_table("trajectories").to_pylist()
    calls = [t for r in rows for t in r["turns"]]
    tagged = [t for t in calls if "<tool_call>" in (t["action"] or "")]
    formed = [t for t in tagged if t["tool"] and not t["tool_error"]]
    ran = [t for t in calls if t["tool"] and not t["tool_error"]
           and not (t["observation"] or "").startswith("error")]
    tools: dict[str, int] = {}
    for t in formed:
        tools[t["tool"]] = tools.get(t["tool"], 0) + 1
    tokens = [sum(len(s["prompt_token_ids"]) + len(s["response_token_ids"]) for s in (r["segments"] or []))
              + len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for r in rows]
    console.print(f"{name} on {len(rows)} {DOMAIN_NAME} episodes (up to {turns} turns, context "
                  f"{context}), {seconds:.0f} s: {len(calls)} turns; {len(tagged)} wrote a "
                  f"<tool_call>, {len(formed)} of them well-formed (name and schema) {tools}; the "
                  f"rest plain text, read as apply_patch; {len(ran)} ran without an error; solved "
                  f"{sum(r['reward_raw'] == 1.0 for r in rows)}/{len(rows)}; tokens per episode "
                  f"{statistics.mean(tokens):,.0f}; ends {sorted(r['episode_end'] for r in rows)}; "
                  f"segments per episode {statistics.mean(1 + len(r['segments'] or []) for r in rows):.2f}")
    for r in rows:
        for s in r["segments"] or []:
            if s.get("summary") is not None:
                console.print(f"  summary ({len(s['summary'])} chars): {s['summary'][:300]!r}")
    for t in calls[:3]:
        console.print(f"  action: {(t['action'] or '')[:160]!r}\n    -> {(t['observation'] or '')[:160]!r}")


def rollout_config(script: str, n: int, turns: int, seed: int):
    from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
    return RunConfig(seed=seed, policy=PolicySpec("scripted", options=(f"script={script}",)),
                     rollout=RolloutSettings(domains=(DOMAIN_NAME,), tasks_per_domain=n,
                                             heldout_per_domain=0, n_samples=1),
                     episode=EpisodeSettings(max_turns=turns, **EPISODE_EXTRA))


EPISODE_EXTRA: dict = {}  # --concurrency N: episode.concurrency (a checkout with free-running episodes)


def beam_rollout(folder: str, name: str, script: str, n: int, turns: int, seed: int,
                 beam_args: list[str]):
    """The rollout pipeline (pipelines/rollout.py's public entry, whatever stages the checkout
    has) on the DirectRunner: (its run dir, the PipelineResult)."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from flywheel.settings.layout import RunLayout
    from flywheel.pipelines.rollout import IterationSpec, run_rollout
    run_dir = os.path.join(folder, name)
    result = run_rollout(rollout_config(script, n, turns, seed), IterationSpec("bench", 0, 0, None),
                         RunLayout(run_dir), PipelineOptions(["--runner=DirectRunner", *beam_args]))
    return run_dir, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("cost", "speed", "contexts", "model", "all"), default="all")
    parser.add_argument("--model", default="smollm2", help="hf policy model (model)")
    parser.add_argument("--context", default="anchored", help="context strategy (model)")
    parser.add_argument("--budget", type=int, default=12_000, help="tokens per context (contexts)")
    parser.add_argument("--model-budget", type=int, default=0,
                        help="tokens per context (model; 0: the model's own context)")
    parser.add_argument("--model-context", type=int, default=2048,
                        help="the hf policy's context option (model)")
    parser.add_argument("--tasks", type=int, default=8, help="episodes timed call by call (cost)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes per way (speed)")
    parser.add_argument("--turns", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=0,
                        help="episode.concurrency of the Beam runs (speed; 0: the default)")
    parser.add_argument("--workers", default="1,2,4",
                        help="multi_processing worker counts (speed), comma-separated")
    parser.add_argument("--rounds", type=int, default=1,
                        help="speed: run every way this many times, in alternating order")
    parser.add_argument("--one-at-a-time", action="store_true",
                        help="speed: also time episodes one at a time in a plain loop")
    args = parser.parse_args()
    if args.concurrency:
        EPISODE_EXTRA["concurrency"] = args.concurrency
    console = Console(width=max(120, shutil.get_terminal_size().columns))
    logging.getLogger("apache_beam.runners.portability.local_job_service").setLevel(logging.ERROR)
    if args.part in ("cost", "all"):
        cost(args.tasks, args.turns, args.seed, console)
    if args.part in ("speed", "all"):
        speed(args.episodes, args.turns, args.seed, console,
              tuple(int(w) for w in args.workers.split(",") if w), args.rounds, args.one_at_a_time)
    if args.part in ("contexts", "all"):
        contexts(args.episodes, args.turns, args.seed, args.budget, console)
    if args.part == "model":  # minutes on CPU: not part of `all`
        model(args.tasks, args.turns, args.seed, args.model, args.context, console, args.model_budget,
              args.model_context)


if __name__ == "__main__":
    main()
