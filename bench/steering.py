"""Steering (issue 23) at equal compute: domain mixture, curriculum, dynamic sampling (top-up).

    python bench/steering.py [--part mixture|curriculum|topup|all] [--out DIR] [--iterations 6]
                             [--n-samples 4] [--seed 0] [--quick]

Every part is an ablation of `flywheel run` with the tiny policy: two arms with the same seed,
the same number of iterations and the same planned training attempts per iteration, differing
only in their steering settings. A part first warm-starts one policy (`flywheel run --iterations
0`) and copies its checkpoints/initial into each arm's run dir before the arm starts (the driver
takes a committed initial checkpoint as its warm start), so both arms start from the same
weights; iteration 0's held-out pass@1 is that policy's in both. Each arm's run dir stays under
`--out DIR/<part>/<arm>` for `flywheel report --run-dir D --html page.html`; every command line,
its wall time and a results table are printed.

mixture: a task file (`--tasks`, no generated tasks) where the easy domain (interval) has 10x
the training tasks of a small one (reverse) and a third (digitsum) is far harder, each with held-out
rows. off: the defaults (every file task each iteration, so the big domain takes most attempts).
on: `--sampler uniform --attempts A --fill-repeats 4` (A = off's attempts per iteration, equal
budget weights: a domain with too few tasks for its third samples them in groups up to 4x) with
`[algorithm] domain_scale = "running"`. Per domain: the file's tasks, attempts share and
update share (watch/*, mean over iterations), steer/shortfall (quota the domain's pool could not
fill), held-out pass@1 first -> last; then the small domain's held-out curve.

curriculum: 20 generated domains (built-in ones and rg_* with demonstrations), `--sampler
curriculum` vs `--sampler uniform`, both with the same `--attempts`. Per domain: held-out pass@1
first -> last and the share of training attempts in groups with signal (1 - zero_variance_frac,
mean over iterations); per iteration the same share over all domains; then attempts on revisited
tasks (first trained in an earlier iteration) vs fresh ones. NB the tiny policy's context is 48
bytes by default: it would see only a prompt's tail, which for every rg_* domain is the same
answer-format instruction ("...</answer> tags."), so this part gives the policy
`--curriculum-context` bytes (192: every chosen domain's prompt fits) in the warm start and both
arms.

topup: a barely warm-started policy (most groups without signal) on four built-in domains,
without and with `--top-up 0.5 --top-up-rounds 3 --top-up-attempts 2`. Per iteration: groups
with signal before / after the top-up and the target, whether it was filled, rounds, top-up
attempts, and the iteration's wall time (from the commit markers).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flywheel.reports.sql import query

MIXTURE = {"interval": 80, "reverse": 8, "digitsum": 16}  # training tasks per domain in the file
MIXTURE_HELDOUT = 32
# 20 domains whose prompts (median bytes: 6..176) fit the curriculum arms' 192-byte context
CURRICULUM = ("add", "interval", "reverse", "digitsum", "pyexpr", "math_linear", "math_discount",
              "math_fractions", "math_quadratic",
              "rg_letter_counting", "rg_count_bits", "rg_gcd", "rg_lcm", "rg_number_sequence",
              "rg_simple_equations", "rg_count_primes", "rg_chain_sum", "rg_basic_arithmetic",
              "rg_spell_backward", "rg_prime_factorization")
TOPUP = ("add", "interval", "reverse", "digitsum")


def flywheel_run(console: Console, run_dir: Path, flags: list[str], initial: Path | None = None
                 ) -> float:
    """`flywheel run` into `run_dir` (its output in run_dir.log), starting from `initial`'s
    warm-started checkpoint when given; returns the wall seconds."""
    if initial is not None:
        shutil.copytree(initial, run_dir / "checkpoints" / "initial")
    command = ["flywheel", "run", "--run-dir", str(run_dir), *flags]
    console.print("[bold]$[/] " + " ".join(f"'{a}'" if a == "" or " " in a else a for a in command))
    log = run_dir.with_suffix(".log")
    start = time.perf_counter()
    with log.open("w") as f:
        done = subprocess.run([sys.executable, "-m", "flywheel.cli.main", *command[1:]],
                              stdout=f, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if done.returncode:
        console.print(log.read_text()[-4000:])
        raise SystemExit(f"flywheel run failed ({done.returncode}); its output: {log}")
    console.print(f"  wall {seconds:.0f} s")
    return seconds


def warm_started(console: Console, root: Path, domains, steps: int, seed: int,
                 extra: tuple[str, ...] = ()) -> Path:
    """One warm start shared by a part's arms: the donor run's checkpoints/initial. Its greedy
    validation runs on 20 tasks per domain every 250 steps (the default, 100 every 100, costs
    more than the training with 20 domains)."""
    donor = root / "warm"
    validation = root / "warm_start.toml"
    validation.write_text("[warm_start]\neval_tasks = 20\neval_every = 250\n")
    flywheel_run(console, donor, ["--config", str(validation), "--iterations", "0",
                                  "--domains", ",".join(domains),
                                  "--warm-start-max-steps", str(steps), "--seed", str(seed),
                                  *extra])
    return donor / "checkpoints" / "initial"


def metric(run_dir: Path, name: str) -> dict[tuple[int, str], float]:
    _, rows = query(str(run_dir), "SELECT iteration, domain, value FROM metrics WHERE name = ?",
                    [name])
    return {(k, d): v for k, d, v in rows}


def mean_over(values: dict, domain: str, iterations: int) -> float:
    points = [values.get((k, domain), 0.0) for k in range(iterations)]
    return sum(points) / len(points)


def attempts_per_iteration(run_dir: Path) -> dict[int, int]:
    _, rows = query(str(run_dir), "SELECT iteration, count(*) FROM trajectories GROUP BY 1")
    return dict(rows)


def iteration_seconds(run_dir: Path, iterations: int) -> list[float]:
    markers = [json.loads((run_dir / "iterations" / str(k) / "_COMMITTED").read_text())
               for k in range(iterations)]
    return [m["rollout_seconds"] + m["train_seconds"] for m in markers]


def first_last(values: dict, domain: str, iterations: int) -> str:
    return f"{values.get((0, domain), 0.0):.3f} -> {values.get((iterations - 1, domain), 0.0):.3f}"


# -- mixture -------------------------------------------------------------------------------------

def write_mixture(path: Path, sizes: dict[str, int], heldout: int, seed: int) -> None:
    from flywheel.domains.registry import get_domain
    with path.open("w") as f:
        for name, n in sizes.items():
            domain = get_domain(name)
            for split, count in (("train", n), ("heldout", heldout)):
                for i in range(count):
                    task = domain.make_task(split, i, seed)
                    f.write(json.dumps({k: task[k] for k in
                                        ("task_id", "domain", "prompt", "answer", "split")}) + "\n")


def mixture(console: Console, out: Path, args) -> None:
    root = out / "mixture"
    root.mkdir(parents=True)
    sizes = {d: max(1, n // (4 if args.quick else 1)) for d, n in MIXTURE.items()}
    heldout = MIXTURE_HELDOUT // (4 if args.quick else 1)
    tasks = root / "tasks.jsonl"
    write_mixture(tasks, sizes, heldout, args.seed)
    attempts = sum(sizes.values()) * args.n_samples
    scale = root / "domain_scale.toml"
    scale.write_text('[algorithm]\ndomain_scale = "running"\n')
    initial = warm_started(console, root, sizes, args.mixture_warm_start, args.seed)
    common = ["--domains", "", "--tasks", str(tasks), "--iterations", str(args.iterations),
              "--n-samples", str(args.n_samples), "--seed", str(args.seed)]
    arms = {"off": common,
            "on": ["--config", str(scale), *common, "--set", "steering.sampler=uniform",
                   "--set", f"steering.attempts={attempts}", "--set", "steering.fill_repeats=4"]}
    walls = {arm: flywheel_run(console, root / arm, flags, initial) for arm, flags in arms.items()}
    mix = ", ".join(f"{d} {n}" for d, n in sizes.items())
    table = Table(title=f"mixture: {mix} training tasks (+{heldout} held-out each), n_samples "
                        f"{args.n_samples}, planned {attempts} attempts/iteration, "
                        f"{args.iterations} iterations")
    for column in ("domain", "train tasks", "arm", "attempt share", "update share",
                   "shortfall/it", "held-out pass@1 first -> last"):
        table.add_column(column)
    for domain in [*sizes, "*"]:
        for arm in arms:
            d, it = root / arm, args.iterations
            short = mean_over(metric(d, "steer/shortfall"), domain, it) if domain != "*" else 0.0
            table.add_row(domain, str(sizes.get(domain, sum(sizes.values()))), arm,
                          f"{mean_over(metric(d, 'watch/attempt_share'), domain, it):.3f}",
                          f"{mean_over(metric(d, 'watch/update_share'), domain, it):.3f}",
                          f"{short:.1f}" if arm == "on" else "-",
                          first_last(metric(d, "heldout_pass@1"), domain, it))
    console.print(table)
    small = min(sizes, key=sizes.get)
    curve = Table(title=f"mixture: held-out pass@1 of the small domain ({small}) per iteration")
    curve.add_column("arm")
    for k in range(args.iterations):
        curve.add_column(str(k))
    curve.add_column("attempts/it (actual)")
    curve.add_column("wall s")
    for arm in arms:
        values = metric(root / arm, "heldout_pass@1")
        done = attempts_per_iteration(root / arm)
        curve.add_row(arm, *(f"{values.get((k, small), 0.0):.3f}" for k in range(args.iterations)),
                      "/".join(str(done.get(k, 0)) for k in range(args.iterations)),
                      f"{walls[arm]:.0f}")
    console.print(curve)


# -- curriculum ----------------------------------------------------------------------------------

def curriculum(console: Console, out: Path, args) -> None:
    root = out / "curriculum"
    root.mkdir(parents=True)
    domains = CURRICULUM[:8] if args.quick else CURRICULUM
    attempts = len(domains) * args.tasks_per_domain * args.n_samples
    context = ("--set", f"policy.options=context={args.curriculum_context}")
    initial = warm_started(console, root, domains, args.curriculum_warm_start, args.seed, context)
    common = [*context, "--domains", ",".join(domains), "--iterations", str(args.iterations),
              "--n-samples", str(args.n_samples), "--tasks-per-domain", str(args.tasks_per_domain),
              "--heldout-per-domain", str(args.heldout), "--set", f"steering.attempts={attempts}",
              "--seed", str(args.seed)]
    arms = {"uniform": [*common, "--set", "steering.sampler=uniform"],
            "curriculum": [*common, "--set", "steering.sampler=curriculum"]}
    walls = {arm: flywheel_run(console, root / arm, flags, initial) for arm, flags in arms.items()}
    it = args.iterations
    table = Table(title=f"curriculum: {len(domains)} domains, {attempts} attempts/iteration "
                        f"({args.tasks_per_domain} tasks x {args.n_samples} samples per domain), "
                        f"{args.heldout} held-out per domain, {it} iterations")
    table.add_column("domain")
    for arm in arms:
        table.add_column(f"{arm} held-out first -> last")
    for arm in arms:
        table.add_column(f"{arm} signal share")
    held = {arm: metric(root / arm, "heldout_pass@1") for arm in arms}
    zero = {arm: metric(root / arm, "zero_variance_frac") for arm in arms}
    for domain in [*domains, "*"]:
        table.add_row(domain, *(first_last(held[arm], domain, it) for arm in arms),
                      *(f"{1 - mean_over(zero[arm], domain, it):.3f}" for arm in arms))
    console.print(table)
    per = Table(title="curriculum: share of attempts with signal per iteration (all domains), "
                      "selected classes, wall time")
    per.add_column("arm")
    for k in range(it):
        per.add_column(str(k))
    per.add_column("selected band/unseen/outside/any (all iterations)")
    per.add_column("wall s")
    for arm in arms:
        _, rows = query(str(root / arm), "SELECT name, sum(value) FROM metrics WHERE name LIKE "
                        "'steer/selected_%' AND domain <> '*' GROUP BY 1")
        picked = {n.removeprefix("steer/selected_"): int(v) for n, v in rows}
        per.add_row(arm, *(f"{1 - zero[arm].get((k, '*'), 0.0):.3f}" for k in range(it)),
                    "/".join(str(picked.get(c, 0)) for c in ("band", "unseen", "outside", "any")),
                    f"{walls[arm]:.0f}")
    console.print(per)
    revisits = Table(title="curriculum: attempts on tasks first trained in an earlier iteration "
                           "(revisits) vs fresh ones")
    for column in ("arm", "kind", "attempts", "tasks", "signal share", "train pass rate"):
        revisits.add_column(column)
    for arm in arms:
        for kind, a, t, share, rate in revisit_figures(root / arm):
            revisits.add_row(arm, kind, str(a), str(t), f"{share:.3f}", f"{rate:.3f}")
    console.print(revisits)


def revisit_figures(run_dir: Path) -> list[tuple]:
    _, rows = query(str(run_dir), """
        SELECT CASE WHEN t.iteration > f.first THEN 'revisit' ELSE 'fresh' END, count(*),
               count(DISTINCT t.task_id),
               avg(CASE WHEN t.filter_reason = 'zero_variance' THEN 0 ELSE 1 END),
               avg(CASE WHEN t.verdict = 'pass' THEN 1 ELSE 0 END)
        FROM trajectories t
        JOIN (SELECT task_id, min(iteration) AS first FROM trajectories GROUP BY 1) f
        USING (task_id)
        GROUP BY 1 ORDER BY 1""")
    return rows


# -- top-up --------------------------------------------------------------------------------------

def signal_groups(run_dir: Path) -> dict[int, tuple[int, int, int]]:
    """Per iteration: (attempts, groups, groups with signal), by the top-up's rule: a group has
    signal when one of its attempts is not filtered."""
    _, rows = query(str(run_dir), "SELECT iteration, sum(n), count(*), sum(signal::int) FROM "
                    "(SELECT iteration, group_id, count(*) AS n, bool_or(NOT filtered) AS signal "
                    "FROM trajectories GROUP BY 1, 2) GROUP BY 1")
    return {k: (int(a), int(g), int(s)) for k, a, g, s in rows}


def topup(console: Console, out: Path, args) -> None:
    root = out / "topup"
    root.mkdir(parents=True)
    initial = warm_started(console, root, TOPUP, args.topup_warm_start, args.seed)
    common = ["--domains", ",".join(TOPUP), "--iterations", str(args.iterations),
              "--n-samples", str(args.n_samples), "--tasks-per-domain", str(args.tasks_per_domain),
              "--heldout-per-domain", str(args.heldout), "--seed", str(args.seed)]
    arms = {"off": common,
            "top-up": [*common, "--set", "steering.top_up=0.5", "--set", "steering.top_up_rounds=3",
                       "--set", "steering.top_up_attempts=2"]}
    walls = {arm: flywheel_run(console, root / arm, flags, initial) for arm, flags in arms.items()}
    table = Table(title=f"top-up: {', '.join(TOPUP)}, {args.tasks_per_domain} tasks x "
                        f"{args.n_samples} samples per domain, target 0.5 of the groups")
    for column in ("arm", "it", "attempts", "groups", "signal before", "signal after", "target",
                   "filled", "rounds", "top-up attempts", "held-out pass@1", "it wall s"):
        table.add_column(column)
    for arm in arms:
        d = root / arm
        steer = {name: metric(d, f"steer/{name}") for name in
                 ("signal_groups_before", "signal_groups_after", "signal_groups_target",
                  "top_up_filled", "top_up_rounds", "top_up_attempts")}
        groups, held = signal_groups(d), metric(d, "heldout_pass@1")
        seconds = iteration_seconds(d, args.iterations)
        for k in range(args.iterations):
            a, g, s = groups.get(k, (0, 0, 0))
            fig = {n: v.get((k, "*")) for n, v in steer.items()}

            def show(name, fmt="{:.0f}"):
                return "-" if fig[name] is None else fmt.format(fig[name])
            table.add_row(arm, str(k), str(a), str(g),
                          show("signal_groups_before") if arm != "off" else str(s),
                          show("signal_groups_after") if arm != "off" else str(s),
                          show("signal_groups_target"), show("top_up_filled", "{:.0f}"),
                          show("top_up_rounds"), show("top_up_attempts"),
                          f"{held.get((k, '*'), 0.0):.3f}", f"{seconds[k]:.0f}")
    console.print(table)
    console.print("run wall s: " + ", ".join(f"{arm} {w:.0f}" for arm, w in walls.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=("mixture", "curriculum", "topup", "all"), default="all")
    parser.add_argument("--out", default=None, help="where the run dirs go (default: a temp dir)")
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--n-samples", type=int, default=4)
    parser.add_argument("--tasks-per-domain", type=int, default=4,
                        help="curriculum and topup: training tasks per domain per iteration")
    parser.add_argument("--heldout", type=int, default=16, help="held-out tasks per domain "
                        "(curriculum, topup)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mixture-warm-start", type=int, default=400)
    parser.add_argument("--curriculum-warm-start", type=int, default=1500,
                        help="20 domains share the warm start's batches (400 steps: pass@1 ~0)")
    parser.add_argument("--curriculum-context", type=int, default=192,
                        help="the tiny policy's context in bytes for the curriculum part")
    parser.add_argument("--topup-warm-start", type=int, default=100,
                        help="short on purpose: most groups then have no signal")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: smaller files, 8 curriculum domains")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-steering-"))
    console = Console(width=200)
    console.print(f"run dirs under {out}")
    for part, fn in (("mixture", mixture), ("curriculum", curriculum), ("topup", topup)):
        if args.part in (part, "all"):
            start = time.perf_counter()
            fn(console, out, args)
            console.print(f"{part}: {time.perf_counter() - start:.0f} s in all\n")


if __name__ == "__main__":
    main()
