"""The hf backend's two hot paths, each beside its baseline, on one model.

    python bench/hf_policy.py [--model smollm2] [--batch 8] [--new-tokens 32] [--seq 256] [--threads 1]

Sampling: Flywheel's sampler (row-seeded inverse CDF, KV cache, one float32 logprob per token)
vs transformers' `generate(do_sample=True, output_scores=True)` on the same prompts; new tokens/s
and the ratio. Scoring: `token_logprobs` forward + backward in chunks (the trainer's path) vs
one full (B, T, V) log-softmax, each in a fresh process so that its peak resident memory is its
own; seconds and peak MB. Training: one RL step (train_on_rows, AdamW) on the sampled rows
with LoRA r=16 vs full fine-tuning; tokens/s. Each figure follows a warm-up call. Use 1 thread on a shared 2-core
machine (as the trainer does): with 2, OpenMP threads wait on each other whenever anything else
runs and both paths slow down 5-10x at random.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from flywheel.policy.rollout_engine import engine_for

PROMPTS = [f"What is {a} + {b}? Answer with just the number." for a, b in
           [(23, 45), (12, 34), (56, 27), (81, 14), (39, 48), (62, 19), (17, 66), (44, 38)]]


def _policy(model: str, threads: int):
    import torch

    from flywheel.policy.backends import create_policy
    torch.set_num_threads(threads)
    policy = create_policy("hf", {"model": model}, seed=0)
    policy.module.eval()
    return policy


def bench_sampling(args) -> dict:
    import torch
    policy = _policy(args.model, args.threads)
    prompts = [policy.encode_prompt(PROMPTS[i % len(PROMPTS)]) for i in range(args.batch)]
    engine_for(policy, local=True).sample(prompts[:1], [1.0], [0], 2)  # warm-up
    with torch.no_grad():
        policy.module.generate(torch.tensor([prompts[0]]), max_new_tokens=2, do_sample=False,
                               pad_token_id=policy.pad_id)
    t = time.perf_counter()
    out = engine_for(policy, local=True).sample(prompts, [1.0] * len(prompts), list(range(len(prompts))), args.new_tokens)
    ours_s = time.perf_counter() - t
    ours_tokens = sum(len(s.token_ids) for s in out)

    tok = policy.tokenizer
    tok.padding_side = "left"
    enc = tok.pad({"input_ids": prompts}, return_tensors="pt")
    torch.manual_seed(0)
    t = time.perf_counter()
    with torch.no_grad():
        gen = policy.module.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                     max_new_tokens=args.new_tokens, output_scores=True,
                                     return_dict_in_generate=True, pad_token_id=policy.pad_id,
                                     eos_token_id=list(policy.eos_ids))
    hf_s = time.perf_counter() - t
    new = gen.sequences[:, enc["input_ids"].shape[1]:]
    hf_tokens = int(sum(int(((row != policy.pad_id).cumsum(0) > 0).sum()) for row in new))
    return {"flywheel_tok_s": ours_tokens / ours_s, "flywheel_tokens": ours_tokens,
            "generate_tok_s": hf_tokens / hf_s, "generate_tokens": hf_tokens}


def bench_scoring(args, mode: str) -> dict:
    """Forward + backward of the sequences' summed logprobs; mode 'chunked' or 'full'."""
    import torch
    import torch.nn.functional as F

    from flywheel.policy.backends.hf.logprobs import positions
    policy = _policy(args.model, args.threads)
    model = policy.module
    g = torch.Generator().manual_seed(0)
    vocab = model.get_output_embeddings().weight.shape[0]
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=g)
    mask = torch.ones_like(ids, dtype=torch.bool)
    temps = torch.ones(args.batch)

    def step(ids, mask, temps):
        if mode == "chunked":
            lp = policy.token_logprobs(ids, mask, temps)
        else:
            logits = model(input_ids=ids, attention_mask=mask.long(), position_ids=positions(mask)).logits
            lp = F.log_softmax(logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        lp.sum().backward()

    step(ids[:1, :8], mask[:1, :8], temps[:1])  # warm-up, small enough not to set the peak
    t = time.perf_counter()
    step(ids, mask, temps)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def bench_training(args, lora_r: int) -> dict:
    """One RL step (train_on_rows, AdamW) on `batch` sampled rows: full fine-tuning or LoRA."""
    import torch

    from flywheel.trainer.optimizer import build_optimizer
    from flywheel.policy.backends import create_policy
    from flywheel.trainer.train_step import TrainConfig, train_on_rows
    torch.set_num_threads(args.threads)
    policy = create_policy("hf", {"model": args.model, "lora_r": lora_r}, seed=0)
    policy.module.eval()
    prompts = [policy.encode_prompt(PROMPTS[i % len(PROMPTS)]) for i in range(args.batch)]
    out = engine_for(policy, local=True).sample(prompts, [1.0] * len(prompts), list(range(len(prompts))), args.new_tokens)
    rows = [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=1.0 if i % 2 else -1.0, sampling_temperature=1.0, filtered=False)
            for i, (p, s) in enumerate(zip(prompts, out))]
    cfg = TrainConfig(epochs=1, minibatch_size=len(rows), lr=1e-5)
    opt = build_optimizer(policy, **cfg.adamw())
    # Warm-up (and Adam's state allocation); its logprob gap is measured before any step.
    first = train_on_rows(policy, opt, rows[:1], cfg, seed=0)
    t = time.perf_counter()
    train_on_rows(policy, opt, rows, cfg, seed=0)
    seconds = time.perf_counter() - t
    tokens = sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for r in rows)
    return {"seconds": seconds, "tok_s": tokens / seconds, "logprob_diff_max": first["logprob_diff_max"]}


def _child(args, what: str) -> dict:
    argv = [sys.executable, __file__, "--child", what, "--model", args.model, "--batch",
            str(args.batch), "--new-tokens", str(args.new_tokens), "--seq", str(args.seq),
            "--threads", str(args.threads)]
    return json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        if args.child.startswith("train-"):
            result = bench_training(args, lora_r=16 if args.child == "train-lora" else 0)
        elif args.child == "sampling":
            result = bench_sampling(args)
        else:
            result = bench_scoring(args, args.child)
        print(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table
    s = _child(args, "sampling")
    chunked, full = _child(args, "chunked"), _child(args, "full")
    table = Table(title=f"hf policy on {args.model}: batch {args.batch}, {args.threads} threads")
    for col in ("path", "figure", "baseline", "ratio"):
        table.add_column(col)
    table.add_row(f"sampling {args.new_tokens} new tokens/row", f"{s['flywheel_tok_s']:.1f} tok/s",
                  f"generate {s['generate_tok_s']:.1f} tok/s",
                  f"{s['flywheel_tok_s'] / s['generate_tok_s']:.2f}x")
    table.add_row(f"logprobs fwd+bwd, T={args.seq}, time", f"chunked {chunked['seconds']:.2f} s",
                  f"full logits {full['seconds']:.2f} s", f"{full['seconds'] / chunked['seconds']:.2f}x")
    table.add_row("  peak resident memory", f"chunked {chunked['peak_mb']:.0f} MB",
                  f"full logits {full['peak_mb']:.0f} MB", f"{full['peak_mb'] / chunked['peak_mb']:.2f}x")
    full_ft, lora = _child(args, "train-full"), _child(args, "train-lora")
    table.add_row(f"RL step, {args.batch} rows, LoRA r=16", f"{lora['tok_s']:.0f} tok/s "
                  f"({lora['seconds']:.1f} s)", f"full fine-tuning {full_ft['tok_s']:.0f} tok/s "
                  f"({full_ft['seconds']:.1f} s)", f"{lora['tok_s'] / full_ft['tok_s']:.2f}x")
    table.add_row("  sampling vs training logprob, max |diff|",
                  f"{lora['logprob_diff_max']:.1e}", f"{full_ft['logprob_diff_max']:.1e}", "")
    Console().print(table)


if __name__ == "__main__":
    main()
