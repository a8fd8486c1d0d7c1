"""Weight loads and engine starts of a real run mixing single- and multi-turn domains.

    python bench/engine_loads.py [--model smollm2] [--engine vllm] [--iterations 3] [--lora-r 16]

A `flywheel run` (hf policy, the given rollout engine) over two-digit sums from a GSM8K-format
task file ("What is 23 + 45? Answer with just the number.": one turn, the `math` domain, where
SmolLM2 is right often enough for groups to differ, so each iteration trains new weights) and
`fix_function` (episodes of up to 3 turns), so Generate and the Turn stages sample in the same
pipeline. Per
iteration it prints the rollout's counters `weight_loads` (times the worker's engine took new
weights: once per iteration is the aim, whatever stages run) and `engine_starts` (engines started:
once per worker for the run, in the in-memory DirectRunner's single worker process), with the
rollout's seconds and whether the checkpoint sampled from has new weights (a digest other
than the previous iteration's: an iteration without signal trains nothing, and its weights load
nothing). With full fine-tuning of a model whose output head is its embedding (SmolLM2)
each checkpoint changes the embedding, which vLLM cannot reload in place (docs/VLLM.md): the
engine restarts; `--lora-r` trains an adapter and keeps it running.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import tempfile


def sums_file(folder: str, n: int, seed: int = 0) -> str:
    """A GSM8K-format JSONL of `n` two-digit sums."""
    rng, path = random.Random(seed), os.path.join(folder, "sums.jsonl")
    with open(path, "w") as f:
        for _ in range(n):
            a, b = rng.randint(10, 49), rng.randint(10, 49)
            f.write(json.dumps({"question": f"What is {a} + {b}? Answer with just the number.",
                                "answer": f"{a} + {b} = {a + b}\n#### {a + b}"}) + "\n")
    return path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2")
    p.add_argument("--engine", default="vllm", choices=("hf", "vllm"))
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--tasks", type=int, default=4, help="tasks per domain (enough for signal)")
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--sums", type=int, default=8, help="single-turn tasks in the task file")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=24)
    args = p.parse_args()

    from rich.console import Console
    from rich.table import Table

    from flywheel.cli.main import main as flywheel
    from flywheel.settings.layout import RunLayout
    from flywheel.policy.checkpoint import recorded_digest
    run_dir = tempfile.mkdtemp(prefix="bench-engine-loads-")
    tasks = sums_file(tempfile.mkdtemp(prefix="bench-engine-tasks-"), args.sums)
    options = f"engine={args.engine},max_new_tokens={args.new_tokens},lora_r={args.lora_r}"
    code = flywheel(["run", "--run-dir", run_dir, "--policy", "hf", "--model", args.model,
                     "--set", f"policy.options={options}", "--iterations", str(args.iterations),
                     "--domains", "fix_function", "--tasks", tasks,
                     "--tasks-per-domain", str(args.tasks),
                     "--heldout-per-domain", "1", "--n-samples", str(args.samples),
                     "--warm-start-max-steps", "0"])
    if code != 0:
        raise SystemExit(f"flywheel run failed ({code}); run dir {run_dir}")
    layout = RunLayout(run_dir)
    table = Table(title=f"{args.model}, engine={args.engine}, lora_r={args.lora_r}: sums (one "
                        f"turn) + fix_function (up to 3 turns), {args.new_tokens} new tokens "
                        "per turn")
    for col in ("iteration", "new weights", "weight_loads", "engine_starts", "episode turns",
                "rollout s"):
        table.add_column(col, justify="right")
    digests = [recorded_digest(layout.join("checkpoints", "initial"))]
    for k in range(args.iterations):
        summary = layout.read_json(layout.commit_marker(k))
        c = summary["counters"]
        digests.append(recorded_digest(layout.checkpoint(k)))
        new = k == 0 or digests[k] != digests[k - 1]
        table.add_row(str(k), "yes" if new else "no", str(c.get("weight_loads", 0)),
                      str(c.get("engine_starts", 0)), str(c.get("episode_turns", 0)),
                      f"{summary['rollout_seconds']:.1f}")
    Console().print(table)
    print(f"run dir: {run_dir} ({os.cpu_count()} cores)")


if __name__ == "__main__":  # vLLM's engine starts spawned processes
    main()
