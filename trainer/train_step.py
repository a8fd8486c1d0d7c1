"""One policy update: rows of trajectories in, optimizer steps out.

`train_on_rows` is the RL step (PPO-style epochs over shuffled minibatches, loss by name from
the registry, optional KL to a frozen reference); `supervised_step` is the warm start on
demonstrations.
"""
import os
from dataclasses import asdict, dataclass

import numpy as np
import torch

from flywheel.trainer.losses import KL_ESTIMATORS, LOSSES, masked_mean
from flywheel.trainer.policy import Policy
from flywheel.trainer.trajectory_batches import make_batch


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 5e-4
    epochs: int = 2
    minibatch_size: int = 128
    loss: str = "grpo"                # a name in LOSSES
    clip_low: float | None = None     # None: the loss's own default (its paper's)
    clip_high: float | None = None
    norm_length: int = 0              # dr_grpo's constant; 0: the longest response of the update
    kl_coef: float = 0.0              # > 0 adds kl_coef * KL(policy || reference) to the loss
    kl_estimator: str = "k3"          # a name in KL_ESTIMATORS
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.99)

    def to_dict(self) -> dict:
        return asdict(self)

    def loss_overrides(self, rows: list[dict]) -> dict:
        """The keywords this config sets for the loss (unset ones keep the loss's defaults)."""
        set_ = {"clip_low": self.clip_low, "clip_high": self.clip_high}
        norm = self.norm_length or max((len(r["response_token_ids"]) for r in rows), default=0)
        return {**{k: v for k, v in set_.items() if v is not None}, "norm_length": norm or None}

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
    reference: Policy | None = None,
) -> dict:
    """`cfg.epochs` passes of minibatch updates over the rows that carry signal.

    Rows flagged `filtered` or with zero advantage are dropped (they add no gradient, only cost).
    `reference` (frozen, eval mode) is required when cfg.kl_coef > 0. Returns, averaged over
    steps: loss, pg_loss, clip_frac, approx_kl (to the sampling policy), grad_norm (pre-clip),
    entropy (Monte-Carlo: the mean of -log pi over the sampled tokens), kl (to the reference,
    when one is used); logprob_diff_mean/max: |training - sampling log-prob| of the same ids,
    measured on the first minibatch before any step (a mismatch that grows means the trainer
    does not train the policy that sampled); and counts.
    """
    if cfg.kl_coef > 0 and reference is None:
        raise ValueError(f"kl_coef={cfg.kl_coef} needs a reference policy")
    rows = [r for r in rows if not r["filtered"] and r["advantage"] != 0]
    if not all(np.isfinite(r["advantage"]) for r in rows):
        raise ValueError("non-finite advantage in trajectories: refusing to train on them")
    names = ["loss", "pg_loss", "clip_frac", "approx_kl", "grad_norm", "entropy"]
    names += ["kl"] if cfg.kl_coef > 0 else []
    stats = dict.fromkeys(names, 0.0)
    counts = {
        "n_sequences": len(rows),
        "n_tokens": sum(len(r["response_token_ids"]) for r in rows),
        "n_steps": 0,
    }
    if not rows:
        return {**stats, **counts}
    loss_fn, overrides = LOSSES.get(cfg.loss), cfg.loss_overrides(rows)
    kl_fn = KL_ESTIMATORS.get(cfg.kl_estimator)
    rng = np.random.default_rng(seed)
    policy.module.train()
    diff = {}
    for _ in range(cfg.epochs):
        order = rng.permutation(len(rows))
        for start in range(0, len(rows), cfg.minibatch_size):
            minibatch = [rows[i] for i in order[start : start + cfg.minibatch_size]]
            b = make_batch(minibatch, policy.pad_id, device)
            mask = b["response_mask"]
            logprobs = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
            if not diff:
                gap = (logprobs.detach() - b["old_logprobs"]).abs()[mask.bool()]
                diff = {"logprob_diff_mean": gap.mean().item(), "logprob_diff_max": gap.max().item()}
            pg_loss, step_stats = loss_fn(logprobs, b["old_logprobs"], b["advantages"], mask,
                                          **overrides)
            loss = pg_loss
            if reference is not None and cfg.kl_coef > 0:
                with torch.no_grad():
                    ref = reference.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"])
                kl = masked_mean(kl_fn(logprobs, ref), mask)
                loss = loss + cfg.kl_coef * kl
                step_stats["kl"] = kl.item()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(policy.module.parameters(), cfg.max_grad_norm)
            optimizer.step()
            counts["n_steps"] += 1
            step_stats.update(loss=loss.item(), pg_loss=pg_loss.item(), grad_norm=grad_norm.item(),
                              entropy=-masked_mean(logprobs.detach(), mask).item())
            for k in stats:
                stats[k] += step_stats[k]
    return {**{k: v / counts["n_steps"] for k, v in stats.items()}, **diff, **counts}


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
