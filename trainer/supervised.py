"""Supervised fine-tuning: cross-entropy on demonstrated responses, before (or instead of) RL.

    from flywheel.trainer.supervised import SFTConfig, example, train_supervised
    examples = [example(policy.encode_prompt(q), policy.encode_response(a)) for q, a in pairs]
    history = train_supervised(policy, optimizer, examples, SFTConfig(epochs=2), seed=0)

An example is a trainer row without the sampling columns: `prompt_token_ids` (context, never
trained on), `response_token_ids` (ending in EOS, so the policy learns to stop) and optionally
`response_mask` (0 at tokens the policy reads but did not write: an episode's observations).
The same pieces as the RL step do the work (`make_batch`, `token_logprobs` scoring from the
first response position, `microbatches`), so a sequence is scored here exactly as the RL
trainer and the sampler score it. Each epoch shuffles by the seed; a minibatch (one optimizer
step) holds at most `batch_tokens` padded tokens and is run as microbatches of at most
`micro_tokens` (gradient accumulation), its loss the mean over all its trained tokens. The step
is the update loop's (trainer/update_loop.py), RL's own: the same clipping, and under torchrun
the same data parallelism.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from flywheel.policy.policy import Policy
from flywheel.trainer.trajectory_batches import first_scored, make_batch
from flywheel.trainer.update_loop import (NO_CLIP, microbatches, run_update, shares, summed,
                                          trained_tokens)

EpochHook = Callable[[int, dict], "dict | None"]   # (epoch, its stats) -> more stats (held-out eval)
StepHook = Callable[[int, int, float], None]       # (epoch, examples done this epoch, step loss)


@dataclass(frozen=True)
class SFTConfig:
    lr: float = 1e-5
    epochs: int = 2
    batch_tokens: int = 4096          # padded tokens per optimizer step (rows x longest row)
    micro_tokens: int = 0             # padded tokens per forward/backward; 0: the whole minibatch
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)

    def __post_init__(self):
        if self.epochs < 0 or self.batch_tokens < 1 or self.micro_tokens < 0 or self.lr <= 0:
            raise ValueError(f"SFTConfig needs epochs >= 0, batch_tokens >= 1, micro_tokens >= 0 "
                             f"and lr > 0; got {self}")

    def adamw(self) -> dict:
        """The optimizer's hyperparameters, for trainer/optimizer.py's build_optimizer."""
        return {"lr": self.lr, "betas": self.betas, "weight_decay": self.weight_decay}

    def to_dict(self) -> dict:
        return asdict(self)


def example(prompt_ids: list[int], response_ids: list[int],
            loss_mask: list[int] | None = None, **extra) -> dict:
    """One demonstration as a row (extra keys, e.g. task_id or source, ride along untouched)."""
    if loss_mask is not None and len(loss_mask) != len(response_ids):
        raise ValueError(f"loss mask of {len(loss_mask)} entries for {len(response_ids)} "
                         "response tokens")
    return {"prompt_token_ids": list(prompt_ids), "response_token_ids": list(response_ids),
            "response_mask": None if loss_mask is None else list(loss_mask), **extra}


def check_fits(rows: list[dict], context: int) -> None:
    """Refuse rows the policy cannot hold (a prompt of no token, or longer than its context)."""
    for i, r in enumerate(rows):
        n = len(r["prompt_token_ids"]) + len(r["response_token_ids"])
        if not r["prompt_token_ids"] or n > context:
            raise ValueError(f"example {i}: {len(r['prompt_token_ids'])} prompt + "
                             f"{len(r['response_token_ids'])} response tokens; a prompt needs at "
                             f"least one token and the whole at most the policy's context "
                             f"({context})")


def as_rows(examples: list[dict]) -> list[dict]:
    """Examples with the columns make_batch reads for sampled rows (teacher forcing: T=1)."""
    return [{"prompt_token_ids": e["prompt_token_ids"], "response_token_ids": e["response_token_ids"],
             "response_mask": e.get("response_mask"), "advantage": 0.0, "sampling_temperature": 1.0,
             "response_logprobs": [0.0] * len(e["response_token_ids"])} for e in examples]


def sequence_logprobs(policy: Policy, rows: list[dict], device) -> tuple[torch.Tensor, torch.Tensor]:
    """(token log-probs (B, L-1), response mask (B, L-1)) of `rows`, with autograd: the RL
    trainer's scoring of the same ids (prompt positions skipped)."""
    b = make_batch(rows, policy.pad_id, device)
    logprobs = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"],
                                     first_scored(rows))
    return logprobs, b["response_mask"]


class SupervisedObjective:
    """Cross-entropy on the trained tokens for the update loop (trainer/update_loop.py): each
    microbatch's summed token loss over the whole minibatch's trained tokens, so the step's
    gradient is the minibatch's token mean."""

    def __init__(self, policy: Policy, device):
        self.policy, self.device = policy, device

    def microbatches(self, share: list[dict], micro_tokens: int) -> list[list[dict]]:
        return microbatches(share, micro_tokens)

    def units(self, micro: list[dict]) -> tuple[int]:
        return (sum(map(trained_tokens, micro)),)

    def loss(self, micro: list[dict], totals) -> tuple[torch.Tensor, dict]:
        logprobs, mask = sequence_logprobs(self.policy, micro, self.device)
        nll = -(logprobs * mask).sum()
        loss = nll / max(totals[0], 1)  # its share of the minibatch's token mean
        return loss, {"loss": loss.item(), "loss_sum": nll.item(),
                      "tokens": self.units(micro)[0], "examples": len(micro)}

    FIGURES = ("loss", "loss_sum", "tokens", "examples")

    def reduce(self, figures: dict, ranks: int) -> dict:
        return summed(figures, ranks, self.FIGURES)


def train_supervised(policy: Policy, optimizer: torch.optim.Optimizer, examples: list[dict],
                     cfg: SFTConfig, seed: int, device: str | torch.device = "cpu",
                     on_epoch: EpochHook | None = None, on_step: StepHook | None = None
                     ) -> list[dict]:
    """`cfg.epochs` passes over `examples`; returns one stats dict per epoch: loss (mean
    cross-entropy per trained token), tokens (trained), examples, steps, grad_norm (mean,
    pre-clip), seconds, plus whatever `on_epoch(epoch, stats)` returns (called after each epoch
    with the policy in eval mode, e.g. a held-out evaluation). Examples with no trained token
    are left out (they carry no gradient). Under a torchrun launch each rank trains on its share
    of every minibatch (trainer/update_loop.py) and every rank returns the same history."""
    rows = [r for r in as_rows(examples) if trained_tokens(r) > 0]
    check_fits(rows, policy.context)
    rng = np.random.default_rng(seed)
    history, started, done = [], [0.0], [0]

    def minibatches(epoch: int):  # each epoch shuffled by the seed, then cut by batch_tokens
        started[0], done[0] = time.time(), 0
        shuffled = [rows[i] for i in rng.permutation(len(rows))]
        return shares(microbatches(shuffled, cfg.batch_tokens) if rows else [])

    def step_done(epoch: int, figures: dict) -> None:
        done[0] += int(figures["examples"])
        if on_step:
            on_step(epoch, done[0], figures["loss_sum"] / max(figures["tokens"], 1))

    def epoch_done(epoch: int, steps: list[dict]) -> None:
        policy.module.eval()
        total = {k: sum(s[k] for s in steps) for k in ("loss_sum", "tokens", "examples", "grad_norm")}
        stats = {"epoch": epoch, "loss": total["loss_sum"] / max(total["tokens"], 1),
                 "tokens": int(total["tokens"]), "examples": int(total["examples"]),
                 "steps": len(steps), "grad_norm": total["grad_norm"] / max(len(steps), 1),
                 "seconds": time.time() - started[0]}
        if on_epoch:
            stats.update(on_epoch(epoch, stats) or {})
        history.append(stats)

    run_update(policy, optimizer, minibatches, SupervisedObjective(policy, device),
               epochs=cfg.epochs, micro_tokens=cfg.micro_tokens, max_grad_norm=cfg.max_grad_norm,
               device=device, on_step=step_done, on_epoch=epoch_done)
    return history


def supervised_step(policy: Policy, optimizer: torch.optim.Optimizer, prompts: list[list[int]],
                    answers: list[list[int]], device: str | torch.device = "cpu",
                    masks: list[list[int]] | None = None, max_grad_norm: float = NO_CLIP
                    ) -> float:
    """One optimizer step of cross-entropy on the answer tokens of one minibatch, in the given
    order (prompts are context; `masks`: 1 per answer token, 0 where it is context, as a
    demonstrated episode's observations); returns the loss. The warm start's step: by default
    its gradient norm is measured but not bounded, as the warm start has always trained (its
    tables stay the same); `max_grad_norm` clips it as the other stages do."""
    rows = as_rows([example(p, a, m) for p, a, m in
                    zip(prompts, answers, masks or [None] * len(answers))])
    steps = run_update(policy, optimizer, lambda epoch: shares([rows]),
                       SupervisedObjective(policy, device), epochs=1,
                       max_grad_norm=max_grad_norm, device=device)
    return steps[0][0]["loss"]


@torch.no_grad()
def mean_loss(policy: Policy, examples: list[dict], device: str | torch.device = "cpu",
              batch_tokens: int = 4096) -> float:
    """The mean cross-entropy per trained token of `examples` under `policy` (no update)."""
    rows = [r for r in as_rows(examples) if trained_tokens(r) > 0]
    policy.module.eval()
    nll, tokens = 0.0, 0
    for micro in microbatches(rows, batch_tokens) if rows else []:
        logprobs, mask = sequence_logprobs(policy, micro, device)
        nll -= (logprobs * mask).sum().item()
        tokens += int(mask.sum().item())
    return nll / max(tokens, 1)
