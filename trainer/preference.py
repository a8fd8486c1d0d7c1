"""Direct preference optimization: raise the chosen response over the rejected one, relative to
the policy the stage started from.

    from flywheel.trainer.preference import DPOConfig, train_preference
    history = train_preference(policy, optimizer, pairs, DPOConfig(beta=0.1), seed=0)

A pair is `prompt_token_ids`, `chosen_token_ids`, `rejected_token_ids` (optionally
`chosen_mask` / `rejected_mask`: 0 at an episode's observation tokens). The reference
log-probabilities are scored once, before the first step, by the very policy about to train
(`with_reference`), and stored on each pair: no second model is held, and with LoRA the
reference is exactly the base plus the adapter at its initial state. Sequences are scored by
`token_logprobs` over make_batch's padded rows, as the RL trainer scores them.

Losses (PREFERENCE_LOSSES, by name): `sigmoid` (DPO, Rafailov et al. 2023; with
`label_smoothing` the conservative cDPO of Mitchell 2023) on summed log-probs; `ipo` (Azar et al.
2023) on per-token mean log-probs, as TRL computes it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from flywheel.registry import Registry
from flywheel.policy.policy import Policy
from flywheel.trainer.supervised import EpochHook, StepHook, as_rows, check_fits, sequence_logprobs
from flywheel.trainer.update_loop import microbatches, run_update, shares, summed

PreferenceLoss = Callable[..., torch.Tensor]
PREFERENCE_LOSSES: Registry[PreferenceLoss] = Registry("preference loss", home=__name__)
STAT_NAMES = ("loss", "reward_margin", "accuracy", "chosen_reward", "rejected_reward")


@dataclass(frozen=True)
class DPOConfig:
    beta: float = 0.1
    loss: str = "sigmoid"             # a name in PREFERENCE_LOSSES
    label_smoothing: float = 0.0      # sigmoid: the share of pairs assumed mislabelled
    lr: float = 1e-6
    epochs: int = 1
    batch_tokens: int = 4096          # padded tokens per optimizer step (both responses counted)
    micro_tokens: int = 0             # per forward/backward; 0: the whole minibatch
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)

    def __post_init__(self):
        PREFERENCE_LOSSES.get(self.loss)  # an unknown name fails here, listing the known
        if self.beta <= 0 or not 0 <= self.label_smoothing < 0.5:
            raise ValueError(f"DPO needs beta > 0 and 0 <= label_smoothing < 0.5; got beta="
                             f"{self.beta}, label_smoothing={self.label_smoothing}")

    def adamw(self) -> dict:
        return {"lr": self.lr, "betas": self.betas, "weight_decay": self.weight_decay}

    def to_dict(self) -> dict:
        return asdict(self)


@PREFERENCE_LOSSES.register("sigmoid")
def sigmoid_loss(logits: torch.Tensor, beta: float, label_smoothing: float = 0.0) -> torch.Tensor:
    """-log sigma(beta * logits), smoothed toward the opposite label; logits (B,) -> (B,)."""
    return (-F.logsigmoid(beta * logits) * (1 - label_smoothing)
            - F.logsigmoid(-beta * logits) * label_smoothing)


@PREFERENCE_LOSSES.register("ipo")
def ipo_loss(logits: torch.Tensor, beta: float, label_smoothing: float = 0.0) -> torch.Tensor:
    """(logits - 1 / (2 beta))^2: a fixed target margin instead of an unbounded one."""
    return (logits - 1 / (2 * beta)) ** 2


def preference_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
                    ref_chosen: torch.Tensor, ref_rejected: torch.Tensor, cfg: DPOConfig
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss per pair, chosen reward, rejected reward), each (B,), from sequence log-probs (B,)
    of the policy and the reference. The implicit reward is beta * (policy - reference)."""
    logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)
    losses = PREFERENCE_LOSSES.get(cfg.loss)(logits, cfg.beta, cfg.label_smoothing)
    return (losses, cfg.beta * (policy_chosen - ref_chosen).detach(),
            cfg.beta * (policy_rejected - ref_rejected).detach())


def pair(prompt_ids: list[int], chosen_ids: list[int], rejected_ids: list[int], **extra) -> dict:
    """One preference pair (extra keys, e.g. margin or task_id, ride along untouched)."""
    return {"prompt_token_ids": list(prompt_ids), "chosen_token_ids": list(chosen_ids),
            "rejected_token_ids": list(rejected_ids), **extra}


def _sides(pairs: list[dict]) -> list[dict]:
    """Each pair as two examples, chosen then rejected, for as_rows."""
    return [{"prompt_token_ids": p["prompt_token_ids"], "response_token_ids": p[f"{side}_token_ids"],
             "response_mask": p.get(f"{side}_mask")} for p in pairs for side in ("chosen", "rejected")]


def sequence_scores(policy: Policy, pairs: list[dict], mean: bool, device
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) log-probs (B,) of the pairs' responses, summed over trained tokens
    (or their mean with `mean`), with autograd."""
    logprobs, mask = sequence_logprobs(policy, as_rows(_sides(pairs)), device)
    scores = (logprobs * mask).sum(-1)
    if mean:
        scores = scores / mask.sum(-1).clamp(min=1)
    return scores[0::2], scores[1::2]


def _groups(pairs: list[dict], max_tokens: int) -> list[list[dict]]:
    """Consecutive pairs grouped so that 2 x pairs x longest sequence stays within max_tokens."""
    views = [{"prompt_token_ids": p["prompt_token_ids"], "pair": p,
              "response_token_ids": max(p["chosen_token_ids"], p["rejected_token_ids"], key=len)}
             for p in pairs]
    return [[v["pair"] for v in g] for g in microbatches(views, max(max_tokens // 2, 1)) if g]


@torch.no_grad()
def with_reference(policy: Policy, pairs: list[dict], cfg: DPOConfig,
                   device: str | torch.device = "cpu") -> list[dict]:
    """The pairs with `ref_chosen` and `ref_rejected`: their scores under `policy` as it is now."""
    policy.module.eval()
    out = []
    for group in _groups(pairs, cfg.batch_tokens):
        chosen, rejected = sequence_scores(policy, group, cfg.loss == "ipo", device)
        out += [{**p, "ref_chosen": c, "ref_rejected": r}
                for p, c, r in zip(group, chosen.tolist(), rejected.tolist())]
    return out


def train_preference(policy: Policy, optimizer: torch.optim.Optimizer, pairs: list[dict],
                     cfg: DPOConfig, seed: int, device: str | torch.device = "cpu",
                     on_epoch: EpochHook | None = None, on_step: StepHook | None = None
                     ) -> list[dict]:
    """`cfg.epochs` passes over `pairs` (references scored first when the pairs lack them);
    one stats dict per epoch: loss, reward_margin (chosen minus rejected implicit reward),
    accuracy (share of pairs whose chosen reward is higher), chosen_reward, rejected_reward,
    all means over the pairs as they were trained; pairs, steps, grad_norm, seconds; plus
    whatever `on_epoch(epoch, stats)` returns."""
    check_fits(as_rows(_sides(pairs)), policy.context)
    if pairs and "ref_chosen" not in pairs[0]:
        pairs = with_reference(policy, pairs, cfg, device)
    rng = np.random.default_rng(seed)
    history, started, sums = [], [0.0], dict.fromkeys(STAT_NAMES, 0.0)

    def minibatches(epoch: int):  # each epoch shuffled by the seed, then cut by batch_tokens
        started[0] = time.time()
        sums.update(dict.fromkeys(STAT_NAMES, 0.0), pairs=0.0)
        return shares(_groups([pairs[i] for i in rng.permutation(len(pairs))], cfg.batch_tokens))

    def step_done(epoch: int, figures: dict) -> None:
        for k in sums:
            sums[k] += figures[k]
        if on_step:
            on_step(epoch, int(sums["pairs"]), sums["loss"] / sums["pairs"])

    def epoch_done(epoch: int, steps: list[dict]) -> None:
        policy.module.eval()
        done = int(sums["pairs"])
        stats = {"epoch": epoch, **{k: sums[k] / max(done, 1) for k in STAT_NAMES}, "pairs": done,
                 "steps": len(steps),
                 "grad_norm": sum(s["grad_norm"] for s in steps) / max(len(steps), 1),
                 "seconds": time.time() - started[0]}
        if on_epoch:
            stats.update(on_epoch(epoch, stats) or {})
        history.append(stats)

    run_update(policy, optimizer, minibatches, PreferenceObjective(policy, cfg, device),
               epochs=cfg.epochs, micro_tokens=cfg.micro_tokens, max_grad_norm=cfg.max_grad_norm,
               device=device, on_step=step_done, on_epoch=epoch_done)
    return history


class PreferenceObjective:
    """The preference loss for the update loop (trainer/update_loop.py): each microbatch's summed
    pair losses over the whole minibatch's pairs, so the step's gradient is the minibatch's mean."""

    def __init__(self, policy: Policy, cfg: DPOConfig, device):
        self.policy, self.cfg, self.device = policy, cfg, device

    def microbatches(self, share: list[dict], micro_tokens: int) -> list[list[dict]]:
        return _groups(share, micro_tokens) if micro_tokens else [share]

    def units(self, micro: list[dict]) -> tuple[int]:
        return (len(micro),)

    def loss(self, micro: list[dict], totals) -> tuple[torch.Tensor, dict]:
        losses, stats = _scored(self.policy, micro, self.cfg, self.device)
        return losses.sum() / totals[0], {**stats, "pairs": len(micro)}

    FIGURES = ("loss", "chosen_reward", "rejected_reward", "reward_margin", "accuracy", "pairs")

    def reduce(self, figures: dict, ranks: int) -> dict:
        return summed(figures, ranks, self.FIGURES)


def _scored(policy: Policy, pairs: list[dict], cfg: DPOConfig, device
            ) -> tuple[torch.Tensor, dict]:
    """(loss per pair, the stats summed over `pairs`) of pairs that carry their references."""
    chosen, rejected = sequence_scores(policy, pairs, cfg.loss == "ipo", device)
    ref = torch.tensor([[p["ref_chosen"], p["ref_rejected"]] for p in pairs], device=chosen.device)
    losses, c, r = preference_loss(chosen, rejected, ref[:, 0], ref[:, 1], cfg)
    return losses, {"loss": losses.sum().item(), "chosen_reward": c.sum().item(),
                    "rejected_reward": r.sum().item(), "reward_margin": (c - r).sum().item(),
                    "accuracy": (c > r).float().sum().item()}


@torch.no_grad()
def evaluate_pairs(policy: Policy, pairs: list[dict], cfg: DPOConfig,
                   device: str | torch.device = "cpu") -> dict:
    """The epoch statistics of `pairs` (with their references) under `policy`, without a step."""
    policy.module.eval()
    sums = dict.fromkeys(STAT_NAMES, 0.0)
    for group in _groups(pairs, cfg.batch_tokens):
        for k, v in _scored(policy, group, cfg, device)[1].items():
            sums[k] += v
    return {k: v / max(len(pairs), 1) for k, v in sums.items()} | {"pairs": len(pairs)}
