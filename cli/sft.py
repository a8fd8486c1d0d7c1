"""`flywheel sft` and `flywheel dpo`: supervised stages beside RL, each writing a checkpoint that
a run starts from (`flywheel run --init-checkpoint OUT`).

    flywheel sft --policy-options model=smollm2,lora_r=8 --domain chat_arith --n 256 --out ckpts/sft \\
        --epochs 2 --lr 1e-5 --eval-domain chat_arith --eval-tasks 64
    flywheel sft --policy-options model=smollm2 --from-run runs/demo --best-per-task --out ckpts/rft
    flywheel sft --from-checkpoint ckpts/sft --tasks mine.jsonl --examples imports/ --out ckpts/sft2
    flywheel dpo --from-checkpoint ckpts/sft --reviews-run runs/demo --beta 0.1 --out ckpts/dpo
    flywheel dpo --policy-options model=smollm2 --pairs imports/ --loss ipo --out ckpts/ipo
    flywheel sft ... --processes 2     # data-parallel: torchrun on this machine, as `run` trains

Sources (several may be given; feedback/sft_data.py, a run's own: feedback/run_sft_data.py):
--tasks task files (a row's `reference` or `response`, else its domain's demonstration), --domain
built-in train tasks demonstrated, --examples / --pairs the sft_examples / preference_pairs tables
`flywheel import` wrote under a folder, --from-run a run's verified successes on their exact ids
(rejection-sampling fine-tuning), --reviews-run pairs of reviewed attempts. Recorded ids are used
only where they spell the row's text under the starting policy (feedback/recorded_ids.py); the
others are re-encoded from the text and counted ("ids re-encoded", also in the checkpoint's meta).
Rows that cannot be used are counted and shown, never fatal. With --eval-domain, greedy held-out
pass@1 of that domain is measured before training and after each epoch, printed, and kept in the
checkpoint's meta.

`--processes N` trains in N data-parallel processes (`torch.distributed.run --standalone` on
this machine: gloo on CPU, NCCL with a GPU each): every process collects the same data, trains on
its share of each step through the one update loop (trainer/update_loop.py: gradients summed
before clipping, so the steps are one process's within rounding), and rank 0 alone evaluates,
prints and writes the checkpoint. An existing torchrun launch (WORLD_SIZE set) is joined as is.
"""
from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from flywheel.cli.arg_types import nonnegative_int, positive_int

# torch, Beam and the data sources are imported in run(): `flywheel --help` starts without them.

SOURCES = {"sft": ("tasks", "domain", "examples", "from_run"), "dpo": ("pairs", "reviews_run")}


def add_parser(sub) -> None:
    sft = sub.add_parser("sft", help="supervised fine-tuning on demonstrations or a run's "
                         "verified successes; writes a checkpoint a run can start from")
    _common(sft, lr=1e-5, epochs=2)
    sft.add_argument("--tasks", action="append", default=[], metavar="FILE",
                     help="task files or patterns (JSONL/JSON/Parquet; repeatable or comma-separated)")
    sft.add_argument("--domain", help="built-in domains whose train tasks are demonstrated (comma-separated)")
    sft.add_argument("--n", type=positive_int, default=256, help="train tasks per --domain")
    sft.add_argument("--examples", metavar="DIR",
                     help="a folder holding tables/sft_examples (flywheel import)")
    sft.add_argument("--from-run", metavar="RUN_DIR", help="train on this run's verified successes (RFT)")
    sft.add_argument("--best-per-task", action="store_true",
                     help="--from-run: one success per task (highest reward, then shortest)")
    dpo = sub.add_parser("dpo", help="direct preference optimization on chosen/rejected pairs; "
                         "writes a checkpoint a run can start from")
    _common(dpo, lr=1e-6, epochs=1)
    dpo.add_argument("--pairs", metavar="DIR",
                     help="a folder holding tables/preference_pairs (flywheel import)")
    dpo.add_argument("--reviews-run", metavar="RUN_DIR",
                     help="pairs of this run's reviewed attempts (same group, different scores)")
    dpo.add_argument("--beta", type=float, default=0.1, help="strength of the tie to the starting policy")
    dpo.add_argument("--loss", default="sigmoid", help="sigmoid (DPO) or ipo")
    dpo.add_argument("--label-smoothing", type=float, default=0.0,
                     help="sigmoid: the share of pairs assumed mislabelled (conservative DPO)")


def _common(p: argparse.ArgumentParser, lr: float, epochs: int) -> None:
    start = p.add_argument_group("the starting policy (one of)")
    start.add_argument("--policy", default="hf", help="policy backend of a fresh policy (default hf)")
    start.add_argument("--policy-options", default="", metavar="K=V,...",
                       help="its options, e.g. model=smollm2,lora_r=8 (LoRA: only an adapter trains)")
    start.add_argument("--from-checkpoint", metavar="CKPT", help="start from this checkpoint instead")
    p.add_argument("--out", required=True, metavar="CKPT_URI", help="where the checkpoint is written")
    p.add_argument("--epochs", type=positive_int, default=epochs)
    p.add_argument("--lr", type=float, default=lr, help="AdamW learning rate")
    p.add_argument("--batch-tokens", type=positive_int, default=4096,
                   help="padded tokens per optimizer step (sequences x longest)")
    p.add_argument("--micro-tokens", type=nonnegative_int, default=0,
                   help="padded tokens per forward/backward (gradient accumulation); 0: the whole step")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-domain", help="a built-in domain whose held-out greedy pass@1 is "
                   "measured before training and after each epoch")
    p.add_argument("--eval-tasks", type=positive_int, default=64, help="held-out tasks of --eval-domain")
    p.add_argument("--sandbox", default="local", help="sandbox backend of the evaluation")
    p.add_argument("--processes", type=positive_int, default=1,
                   help="data-parallel training processes on this machine (torchrun; one GPU each "
                        "where there are GPUs)")


def run(args, console) -> int:
    chosen = [k for k in SOURCES[args.command] if getattr(args, k)]
    if not chosen:
        flags = ", ".join("--" + k.replace("_", "-") for k in SOURCES[args.command])
        console.print(f"[red]error:[/] flywheel {args.command} needs a data source: {flags}")
        return 2
    if args.from_checkpoint and args.policy_options:
        console.print("[red]error:[/] give --from-checkpoint or --policy-options, not both")
        return 2
    from flywheel.trainer import distributed
    if args.processes > 1 and not distributed.launched():
        return _launch(args, console)
    errors, who = console, ""
    if distributed.launched():
        distributed.start()
        distributed.die_with_launcher()
        rank = distributed.world()[0]
        if rank != 0:  # rank 0 speaks for the launch; another speaks only of its own error
            from rich.console import Console
            console, errors, who = Console(quiet=True), Console(stderr=True), f"rank {rank}: "
    try:
        code = _train(args, console)
    except (FileNotFoundError, ValueError, KeyError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        errors.print(f"[red]error:[/] {who}{escape(str(message))}", highlight=False)
        distributed.finish(together=False)
        return 2
    except BaseException:
        distributed.finish(together=False)
        raise
    distributed.finish()
    return code


def _launch(args, console) -> int:
    """Run this very command in `args.processes` data-parallel processes; their exit status."""
    import sys

    from flywheel.cli.launch_ranks import launch
    console.print(f"training in {args.processes} data-parallel processes (torchrun)")
    return launch(list(getattr(args, "argv", None) or sys.argv[1:]), args.processes)


def _start(args, device):
    """(policy, its digest, meta of the start) from --from-checkpoint or a fresh policy."""
    from flywheel.settings.option_items import parse_options, split_items
    from flywheel.policy.checkpoint import load_checkpoint, policy_digest
    from flywheel.policy.backends import create_policy
    if args.from_checkpoint:
        ckpt = load_checkpoint(args.from_checkpoint, device=device)
        return ckpt.policy, ckpt.digest, {"checkpoint": args.from_checkpoint, "stage": ckpt.meta.get(
            "stage"), "policy_version": int(ckpt.meta.get("policy_version", 0))}
    options = parse_options(split_items(args.policy_options, "--policy-options"), "--policy-options")
    policy = create_policy(args.policy, options, args.seed, device)
    return policy, policy_digest(policy), {"policy": args.policy, "options": options}


def _collect(args, policy, digest: str):
    from flywheel.feedback import run_sft_data, sft_data
    out = sft_data.Collected()
    if args.command == "sft":
        if args.tasks:
            patterns = [p for item in args.tasks for p in item.split(",") if p]
            out.extend(sft_data.task_file_examples(policy, patterns, args.seed))
        if args.domain:
            out.extend(sft_data.domain_examples(policy, args.domain.split(","), args.n, args.seed))
        if args.examples:
            out.extend(sft_data.table_examples(policy, args.examples, digest))
        if args.from_run:
            out.extend(run_sft_data.run_examples(args.from_run, policy, args.best_per_task))
    else:
        if args.pairs:
            out.extend(sft_data.table_pairs(policy, args.pairs, digest))
        if args.reviews_run:
            out.extend(run_sft_data.review_pairs(args.reviews_run, policy))
    return sft_data.within_context(out, policy.context)


def _data_table(collected, kind: str) -> Table:
    table = Table("source", kind, title="training data")
    for source, n in sorted(collected.sources.items()):
        table.add_row(escape(source), str(n))
    for reason, n in sorted(collected.reencoded.items(), key=lambda kv: -kv[1]):
        table.add_row(f"[yellow]ids re-encoded from the text:[/] {escape(reason)}", str(n))
    for reason, n in sorted(collected.skipped.items(), key=lambda kv: -kv[1]):
        table.add_row(f"[yellow]left out:[/] {escape(reason)}", str(n))
    return table


def heldout_measure(policy, domain_name: str, n_tasks: int, seed: int, sandbox: str = "local"):
    """A function measuring `policy`'s greedy pass@1 on held-out tasks 0..n_tasks-1 of a
    built-in domain, as the warm start measures (plain_rollout)."""
    from flywheel.domains.registry import get_domain
    from flywheel.pipelines.plain_rollout import pass_rate_by_domain, plain_rollout
    domain = get_domain(domain_name)
    tasks = [domain.make_task("heldout", i, seed) for i in range(n_tasks)]

    def measure() -> float:
        policy.module.eval()
        scored, _ = plain_rollout(policy, tasks, n_samples=1, temperature=0.0, seed=seed,
                                  mode="heldout", sandbox=sandbox)
        return pass_rate_by_domain(scored).get(domain.name, 0.0)
    return measure


def _train(args, console) -> int:
    import torch
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flywheel.policy.checkpoint import save_checkpoint
    from flywheel.trainer.optimizer import build_optimizer
    from flywheel.policy.device import pick_device
    dpo = args.command == "dpo"
    kind = "pairs" if dpo else "examples"
    cfg = _config(args)
    torch.manual_seed(args.seed)
    device = pick_device()
    with console.status("loading the policy"):
        policy, digest, start = _start(args, device)
    with console.status(f"collecting {kind}"):
        collected = _collect(args, policy, digest)
    console.print(_data_table(collected, kind))
    for note in collected.notes:
        console.print(f"  [dim]{escape(note)}[/]", highlight=False)
    if not collected.items:
        console.print(f"[red]error:[/] no usable {kind}: nothing to train on")
        return 1
    from flywheel.trainer import distributed
    rank = distributed.world()[0]
    measure = (heldout_measure(policy, args.eval_domain, args.eval_tasks, args.seed, args.sandbox)
               if args.eval_domain and rank == 0 else None)
    heldout = []
    if measure:
        with console.status(f"held-out greedy pass@1 of {args.eval_domain}, before training"):
            heldout.append({"epoch": 0, "heldout_pass@1": measure()})
        console.print(f"epoch 0: held-out pass@1 {heldout[0]['heldout_pass@1']:.3f}")

    def on_epoch(epoch: int, stats: dict) -> dict:
        extra = {}
        if measure:
            extra = {"heldout_pass@1": measure()}
            heldout.append({"epoch": epoch, **extra})
        shown = ", ".join(f"{k} {v:.4g}" for k, v in {**stats, **extra}.items()
                          if k in ("loss", "reward_margin", "accuracy", "heldout_pass@1"))
        progress.console.print(f"epoch {epoch}: {shown}", highlight=False)
        return extra

    optimizer = build_optimizer(policy, **cfg.adamw())
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("loss {task.fields[loss]:.4f}"), TimeElapsedColumn(),
                        console=console)
    bars = {e: progress.add_task(f"epoch {e}/{args.epochs}", total=len(collected.items), loss=0.0,
                                 visible=False) for e in range(1, args.epochs + 1)}

    def on_step(epoch: int, done: int, loss: float) -> None:
        progress.update(bars[epoch], completed=done, loss=loss, visible=True)

    with progress:
        if dpo:
            from flywheel.trainer.preference import train_preference
            history = train_preference(policy, optimizer, collected.items, cfg, args.seed,
                                       device, on_epoch, on_step)
        else:
            from flywheel.trainer.supervised import train_supervised
            history = train_supervised(policy, optimizer, collected.items, cfg, args.seed,
                                       device, on_epoch, on_step)
    meta = {"policy_version": int(start.get("policy_version", 0)), "stage": args.command,
            args.command: {"config": cfg.to_dict(), "seed": args.seed, "start_digest": digest,
                           "processes": distributed.world()[1],
                           "start": start,
                           "data": {"sources": dict(collected.sources),
                                    "left_out": dict(collected.skipped),
                                    "ids_reencoded": dict(collected.reencoded)},
                           "epochs": history, "heldout": heldout,
                           "eval": {"domain": args.eval_domain, "tasks": args.eval_tasks}
                           if measure else None}}
    if rank != 0:  # rank 0 writes the one checkpoint; the others hold the same weights
        return 0
    with console.status(f"writing the checkpoint to {args.out}"):
        out_digest = save_checkpoint(args.out, policy, optimizer, meta)
    console.print(_epochs_table(args, history, heldout, dpo))
    console.print(f"wrote {escape(args.out)} ({out_digest[:19]}); start RL from it with "
                  f"flywheel run --init-checkpoint {escape(args.out)}", highlight=False)
    return 0


def _config(args):
    if args.command == "dpo":
        from flywheel.trainer.preference import DPOConfig
        return DPOConfig(beta=args.beta, loss=args.loss, label_smoothing=args.label_smoothing,
                         lr=args.lr, epochs=args.epochs, batch_tokens=args.batch_tokens,
                         micro_tokens=args.micro_tokens)
    from flywheel.trainer.supervised import SFTConfig
    return SFTConfig(lr=args.lr, epochs=args.epochs, batch_tokens=args.batch_tokens,
                     micro_tokens=args.micro_tokens)


def _epochs_table(args, history: list[dict], heldout: list[dict], dpo: bool) -> Table:
    names = ["loss", "reward_margin", "accuracy"] if dpo else ["loss", "tokens"]
    cols = ["epoch", *names, "steps", "s"] + ([f"held-out pass@1 ({args.eval_domain})"] if heldout else [])
    table = Table(*cols, title=f"flywheel {args.command}")
    rates = {h["epoch"]: h["heldout_pass@1"] for h in heldout}
    if heldout:
        table.add_row("0", *["-"] * (len(cols) - 2), f"{rates[0]:.3f}")
    for h in history:
        row = [str(h["epoch"]), *(f"{h[k]:.4g}" for k in names), str(h["steps"]), f"{h['seconds']:.0f}"]
        table.add_row(*row, *([f"{rates[h['epoch']]:.3f}"] if heldout else []))
    return table
