"""One policy update: rows of trajectories in, optimizer steps out.

`train_on_rows` is the RL step (PPO-style epochs over shuffled minibatches, loss by name from
the registry); `supervised_step` is the warm start on demonstrations.
"""
import os
from dataclasses import asdict, dataclass

import numpy as np
import torch

from flywheel.trainer.losses import LOSSES, masked_mean
from flywheel.trainer.policy import Policy
from flywheel.trainer.trajectory_batches import make_batch


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 5e-4
    epochs: int = 2
    minibatch_size: int = 128
    clip_eps: float = 0.2
    max_grad_norm: float = 1.0
    loss: str = "grpo"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.99)

    def to_dict(self) -> dict:
        return asdict(self)

    def adamw(self) -> dict:
        """The optimizer's hyperparameters, for build_optimizer and apply_hyperparams."""
        return {"lr": self.lr, "betas": self.betas, "weight_decay": self.weight_decay}


def pick_device() -> torch.device:
    """CUDA when present, else CPU with FLYWHEEL_TORCH_THREADS intra-op threads (default 1).

    Why 1: on the 2-core dev machine a second thread makes train_on_rows at most ~1.6x faster
    when the machine is idle (1.1 s vs 1.9 s for 2048 rows), but whenever anything else runs
    (Beam workers, sandboxes, tests) the OpenMP threads wait on each other and it gets 5-10x
    slower (10-25 s). Set FLYWHEEL_TORCH_THREADS on a dedicated many-core trainer.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    torch.set_num_threads(int(os.environ.get("FLYWHEEL_TORCH_THREADS", "1")))
    return torch.device("cpu")


@torch.enable_grad()  # training needs autograd even if a caller switched it off globally
def train_on_rows(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    rows: list[dict],
    cfg: TrainConfig,
    seed: int,
    device: str | torch.device = "cpu",
) -> dict:
    """`cfg.epochs` passes of minibatch updates over the rows that carry signal.

    Rows flagged `filtered` or with zero advantage are dropped (they add no gradient, only cost).
    Returns loss, clip_frac, approx_kl, grad_norm (pre-clip) averaged over steps, and counts.
    """
    rows = [r for r in rows if not r["filtered"] and r["advantage"] != 0]
    if not all(np.isfinite(r["advantage"]) for r in rows):
        raise ValueError("non-finite advantage in trajectories: refusing to train on them")
    stats = {"loss": 0.0, "clip_frac": 0.0, "approx_kl": 0.0, "grad_norm": 0.0}
    counts = {
        "n_sequences": len(rows),
        "n_tokens": sum(len(r["response_token_ids"]) for r in rows),
        "n_steps": 0,
    }
    if not rows:
        return {**stats, **counts}
    loss_fn = LOSSES.get(cfg.loss)
    rng = np.random.default_rng(seed)
    policy.module.train()
    for _ in range(cfg.epochs):
        order = rng.permutation(len(rows))
        for start in range(0, len(rows), cfg.minibatch_size):
            minibatch = [rows[i] for i in order[start : start + cfg.minibatch_size]]
            b = make_batch(minibatch, policy.pad_id, device)
            logprobs = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
            loss, step_stats = loss_fn(
                logprobs, b["old_logprobs"], b["advantages"], b["response_mask"], cfg.clip_eps
            )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.module.parameters(), cfg.max_grad_norm)
            optimizer.step()
            counts["n_steps"] += 1
            for k, v in {"loss": loss.item(), "grad_norm": grad_norm.item(), **step_stats}.items():
                stats[k] += v
    return {**{k: v / counts["n_steps"] for k, v in stats.items()}, **counts}


@torch.enable_grad()
def supervised_step(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    prompts: list[list[int]],
    answers: list[list[int]],
    device: str | torch.device = "cpu",
) -> float:
    """One step of cross-entropy on the answer tokens only (prompts are context); returns the loss."""
    rows = [
        {"prompt_token_ids": p, "response_token_ids": a, "response_logprobs": [0.0] * len(a)}
        for p, a in zip(prompts, answers)
    ]
    rows = [dict(r, advantage=0.0, sampling_temperature=1.0) for r in rows]
    b = make_batch(rows, policy.pad_id, device)
    policy.module.train()
    logprobs = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
    loss = -masked_mean(logprobs, b["response_mask"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()
