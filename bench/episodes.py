"""Multi-turn episodes: speed of turn-batched stages, and what turns and RL buy.

    python bench/episodes.py [--part speed|learn|all] [--episodes 256] [--iterations 8]
                             [--warm-start-steps 150] [--lr 1e-4] [--credit outcome|turn]
                             [--kl-coef 0] [--carry-optimizer true|false] [--seed 0]
                             [--heldout 100]

speed: the same episodes (fix_function, 3 turns, the same policy and seeds) three ways, side by
side in one process: one episode at a time (sample a turn, run its tool, next turn), turn-batched
in a plain loop (all live episodes sampled in one call per turn, tools run 4 at a time), and the
rollout's Beam stages on the DirectRunner (StartEpisodes -> Turn x3 -> EndEpisodes). Prints
episodes/s and the ratios to one-at-a-time.

learn: `flywheel run` on fix_function and shell_pick with --max-turns 3 after a short warm start,
then each iteration's checkpoint evaluated greedily on the same held-out tasks with one turn
(the single-turn rollout) and with three (the run's own held-out metric). Prints both per
iteration.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table
from flywheel.domains.episode_settings import EpisodeSettings
from flywheel.policy.rollout_engine import engine_for

SETTINGS = EpisodeSettings(max_turns=3)  # the episodes every measurement here runs

DOMAINS = ("fix_function", "shell_pick")


def episodes(n: int, seed: int = 0):
    from flywheel.domains.registry import get_domain
    from flywheel.transforms.expand import expand_task
    from flywheel.transforms.turn import start_episode
    domain = get_domain("fix_function")
    tasks = [domain.make_task("train", i, seed) for i in range(n // 4)]
    attempts = [a for t in tasks for a in expand_task(
        t, run_id="bench", iteration=0, policy_version=0, seed=seed, n_samples=4,
        temperature=1.0, mode="train")]
    return [start_episode(a, SETTINGS) for a in attempts]


def one_at_a_time(policy, live, backend) -> list:
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.transforms.turn import act, end_episode, generate_turn_batch, with_sample
    done, runner = [], ToolRunner(backend)
    for attempt in live:
        while not attempt.episode.end:
            attempt = with_sample(attempt, generate_turn_batch(policy, [attempt], engine_for(policy, local=True), SETTINGS)[0])
            attempt, _ = act(attempt, runner, SETTINGS)
        done.append(end_episode(attempt))
    return done


def turn_batched(policy, live, backend, workers: int = 4, score: bool = False) -> list:
    """All live episodes sampled in one call per turn, their actions taken `workers` at a time;
    `score`: each episode that ends is also scored (its answer run, as the rollout's Execute
    does) in that turn's round of tool calls: the same work as the rollout's episode stage."""
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.transforms.execute import execute_batch
    from flywheel.transforms.turn import act, end_episode, generate_turn_batch, with_sample
    done, runner = [], ToolRunner(backend)
    with ThreadPoolExecutor(workers) as pool:
        while live:
            sampled = [with_sample(a, f) for a, f in zip(live, generate_turn_batch(policy, live, engine_for(policy, local=True), SETTINGS))]
            acted = list(pool.map(lambda a: act(a, runner, SETTINGS)[0], sampled))
            ended = [end_episode(a) for a in acted if a.episode.end]
            done += execute_batch(ended, runner, pool)[0] if score and ended else ended
            live = [a for a in acted if not a.episode.end]
    return done


def beam_stages(live, policy_dir: str) -> int:
    import apache_beam as beam
    from flywheel.transforms.episodes import Episodes
    from flywheel.transforms.policy_model import PolicyModelHandler
    handler = PolicyModelHandler(policy_dir, backend="tiny", init_seed=0)
    p = beam.Pipeline()
    _ = p | beam.Create([a.replace(episode=None) for a in live]) | Episodes(handler, 3, SETTINGS, "local")
    result = p.run()
    result.wait_until_finish()
    ends = ("solved", "submitted", "max_turns", "budget", "failed")  # end_episode's counters
    return sum(c.committed for c in result.metrics().query()["counters"]
               if c.key.metric.name in {f"episodes_{e}" for e in ends})


def speed(n: int, console: Console) -> None:
    from flywheel.sandbox import get_backend
    from flywheel.policy.checkpoint import save_checkpoint
    from flywheel.policy.backends import create_policy
    policy = create_policy("tiny", {}, 0, "cpu")
    policy.module.eval()
    policy_dir = tempfile.mkdtemp(prefix="bench-episodes-")
    save_checkpoint(policy_dir, policy, None, {"policy_version": 0})
    backend = get_backend("local")
    figures = {}
    try:
        for name, fn in (("one at a time", lambda: one_at_a_time(policy, episodes(n), backend)),
                         ("turn-batched loop", lambda: turn_batched(policy, episodes(n), backend)),
                         ("Beam Turn stages", lambda: beam_stages(episodes(n), policy_dir))):
            start = time.perf_counter()
            result = fn()
            count = result if isinstance(result, int) else len(result)
            figures[name] = count / (time.perf_counter() - start)
    finally:
        backend.close()
    table = Table(title=f"{n} fix_function episodes, up to 3 turns, tiny policy, local sandbox")
    for column in ("way", "episodes/s", "vs one at a time"):
        table.add_column(column)
    base = figures["one at a time"]
    for name, rate in figures.items():
        table.add_row(name, f"{rate:.1f}", f"{rate / base:.2f}x")
    console.print(table)


def learn(iterations: int, console: Console, warm_start_steps: int = 150, lr: float = 1e-4,
          credit: str = "outcome", kl_coef: float = 0.0, carry_optimizer: str = "true",
          seed: int = 0, heldout_per_domain: int = 100) -> None:
    from flywheel.domains.registry import get_domain
    from flywheel.settings.layout import RunLayout
    from flywheel.pipelines.plain_rollout import pass_rate_by_domain, plain_rollout
    from flywheel.policy.checkpoint import load_checkpoint
    run_dir = Path(tempfile.mkdtemp(prefix="bench-episodes-run-")) / "run"
    command = [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run_dir),
               "--iterations", str(iterations), "--domains", ",".join(DOMAINS), "--max-turns", "3",
               "--tasks-per-domain", "32", "--n-samples", "8",
               "--heldout-per-domain", str(heldout_per_domain), "--seed", str(seed),
               "--warm-start-max-steps", str(warm_start_steps), "--lr", str(lr), "--set", f"algorithm.credit={credit}",
               "--set", f"train.kl_coef={kl_coef}", "--set", f"warm_start.carry_optimizer={carry_optimizer}"]
    console.print(" ".join(command[2:]))
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    console.print(f"run: {time.perf_counter() - start:.0f} s")
    layout = RunLayout(str(run_dir))
    metrics = layout.read_table("metrics").to_pylist()
    multi = {(m["iteration"], m["domain"]): m["value"] for m in metrics if m["name"] == "heldout_pass@1"}
    heldout = [get_domain(d).make_task("heldout", i, seed) for d in DOMAINS
               for i in range(heldout_per_domain)]
    table = Table(title="held-out pass@1, greedy, the same checkpoint and tasks")
    for column in ("iteration", *(f"{d} {k}" for d in DOMAINS for k in ("1 turn", "3 turns"))):
        table.add_column(column)
    for it in range(iterations):
        policy = load_checkpoint(layout.checkpoint(it - 1) if it else layout.checkpoint(None)).policy
        policy.module.eval()
        scored, _ = plain_rollout(policy, heldout, n_samples=1, temperature=0.0, seed=0, mode="heldout")
        single = pass_rate_by_domain(scored)
        table.add_row(str(it), *(f"{v:.3f}" for d in DOMAINS
                                 for v in (single.get(d, 0.0), multi.get((it, d), 0.0))))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("speed", "learn", "all"), default="all")
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--warm-start-steps", type=int, default=150,
                        help="a partial warm start, so RL has room to show (~0.2; 200 steps: ~0.9)")
    parser.add_argument("--lr", type=float, default=1e-4,
                        help="RL learning rate (1e-3 collapsed shell_pick in one update)")
    parser.add_argument("--credit", choices=("outcome", "turn"), default="outcome",
                        help="outcome: one advantage per episode; turn: each turn's own")
    parser.add_argument("--kl-coef", type=float, default=0.0,
                        help="weight of KL to the warm-started policy (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (tasks, sampling)")
    parser.add_argument("--heldout", type=int, default=100, help="held-out tasks per domain")
    parser.add_argument("--carry-optimizer", choices=("true", "false"), default="true",
                        help="the first RL update continues the warm start's Adam moments (true) "
                             "or starts a fresh Adam (false, as before 2026-12-06)")
    args = parser.parse_args()
    console = Console()
    if args.part in ("speed", "all"):
        speed(args.episodes, console)
    if args.part in ("learn", "all"):
        learn(args.iterations, console, args.warm_start_steps, args.lr, args.credit, args.kl_coef,
              args.carry_optimizer, args.seed, args.heldout)


if __name__ == "__main__":
    main()
