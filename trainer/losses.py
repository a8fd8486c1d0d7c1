"""Policy losses and KL estimators, by name: pure tensor functions in the style of verl's core_algos.

Every loss has one signature, so the train step calls any of them the same way:

    loss, stats = LOSSES.get(name)(logprobs, old_logprobs, advantages, mask, **overrides)

logprobs, old_logprobs, mask: (B, T), mask 1.0 at response tokens; advantages: (B,), one per
sequence, or (B, T), one per token (per-turn credit of multi-turn episodes; a sequence-level
loss then uses each sequence's masked mean). Keywords clip_low, clip_high (the ratio's trust region [1 - low, 1 + high]) and
norm_length (Dr. GRPO's constant) default to each loss's paper; a run overrides the ones it sets.
The losses differ in where the ratio lives (token or sequence) and how tokens are averaged:

    grpo     token ratio, mean over each sequence's tokens, then over sequences (GRPO paper)
    dapo     token ratio, one mean over all tokens of the batch, clip-higher 0.2 / 0.28
    dr_grpo  token ratio, sum over tokens / a constant length, mean over sequences
    gspo     sequence ratio (geometric mean of token ratios), clip 3e-4 / 4e-4, mean over sequences

Stats: clip_frac (share of tokens, or of sequences for gspo, where clipping removed the
gradient) and approx_kl (k3 estimate of KL(old || new), >= 0).

`LOSS_UNITS[name]` says what a loss averages over ("token", or "sequence": the sequences that
have tokens), so the train step can split a minibatch into microbatches and weight each one's
loss by its share of those units: the accumulated gradient is the whole minibatch's.
"""
from typing import Callable

import torch

from flywheel.registry import Registry

LossFn = Callable[..., tuple[torch.Tensor, dict]]
LOSSES: Registry[LossFn] = Registry("loss", home=__name__)
KlFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_ESTIMATORS: Registry[KlFn] = Registry("KL estimator", home=__name__)
LOSS_UNITS = {"grpo": "sequence", "dapo": "token", "dr_grpo": "sequence", "gspo": "sequence"}


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean of x (B, T) over mask (B, T); 0 when the mask is empty."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def sequence_means(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean of x (B, T) over mask (B, T) -> (B,); 0 for a sequence with no tokens."""
    return (x * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def _clipped_objective(ratio: torch.Tensor, adv: torch.Tensor, clip_low: float,
                       clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's pessimistic term max(-A r, -A clip(r)) and where clipping won (no gradient there).

    ratio and adv broadcast to the same shape; returns (losses, clipped-won as float)."""
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()


def _token_terms(logprobs, old_logprobs, advantages, mask, clip_low, clip_high):
    """Per-token clipped losses (B, T), clipped-won flags (B, T) and the k3 KL(old || new) (B, T)."""
    log_ratio = (logprobs - old_logprobs) * mask  # masked first: padding may hold anything
    ratio = torch.exp(log_ratio)
    adv = advantages if advantages.dim() == 2 else advantages.unsqueeze(1)
    losses, won = _clipped_objective(ratio, adv, clip_low, clip_high)
    return losses, won, (ratio - 1.0 - log_ratio).detach()


@LOSSES.register("grpo")
def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, clip_low: float = 0.2, clip_high: float = 0.2,
              norm_length: float | None = None) -> tuple[torch.Tensor, dict]:
    """GRPO (Shao et al. 2024): PPO-clipped token ratios, averaged over each sequence's tokens and
    then over sequences, so a long response weighs as much as a short one in total.

    (B, T), (B, T), (B,), (B, T) -> scalar. Sequences without tokens count as 0 in the mean
    over sequences that have some."""
    losses, won, kl = _token_terms(logprobs, old_logprobs, advantages, mask, clip_low, clip_high)
    has_tokens = (mask.sum(1) > 0).float()
    loss = (sequence_means(losses, mask) * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)
    return loss, {"clip_frac": masked_mean(won, mask).item(), "approx_kl": masked_mean(kl, mask).item()}


@LOSSES.register("dapo")
def dapo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, clip_low: float = 0.2, clip_high: float = 0.28,
              norm_length: float | None = None) -> tuple[torch.Tensor, dict]:
    """DAPO (Yu et al. 2025): clip-higher (a wider upper bound lets unlikely tokens grow, against
    entropy collapse) and one token-level mean over the whole batch, so every token weighs the
    same whatever the length of its response.

    (B, T), (B, T), (B,), (B, T) -> scalar."""
    losses, won, kl = _token_terms(logprobs, old_logprobs, advantages, mask, clip_low, clip_high)
    return masked_mean(losses, mask), {"clip_frac": masked_mean(won, mask).item(),
                                       "approx_kl": masked_mean(kl, mask).item()}


@LOSSES.register("dr_grpo")
def dr_grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                 mask: torch.Tensor, *, clip_low: float = 0.2, clip_high: float = 0.2,
                 norm_length: float | None = None) -> tuple[torch.Tensor, dict]:
    """Dr. GRPO (Liu et al. 2025): the sum over a sequence's tokens divided by one constant
    (`norm_length`, e.g. the generation budget; default the batch's padded length T) instead of
    the sequence's own length, so wrong answers are not pushed to grow longer; mean over the
    sequences that have tokens.
    Pair it with the `dr_grpo` advantage (no std division).

    (B, T), (B, T), (B,), (B, T) -> scalar."""
    losses, won, kl = _token_terms(logprobs, old_logprobs, advantages, mask, clip_low, clip_high)
    norm = float(norm_length) if norm_length else float(mask.shape[1])
    n_sequences = (mask.sum(1) > 0).sum().clamp(min=1)
    loss = (losses * mask).sum() / (norm * n_sequences)
    return loss, {"clip_frac": masked_mean(won, mask).item(), "approx_kl": masked_mean(kl, mask).item()}


@LOSSES.register("gspo")
def gspo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, clip_low: float = 3e-4, clip_high: float = 4e-4,
              norm_length: float | None = None) -> tuple[torch.Tensor, dict]:
    """GSPO (Zheng et al. 2025): one importance ratio per sequence, the length-normalised
    exp(mean_t(log new - log old)), clipped per sequence (hence the tiny clip range); mean over
    the sequences that have tokens. Token-level noise in the ratio no longer decides the update.

    (B, T), (B, T), (B,), (B, T) -> scalar; clip_frac is the share of sequences clipped."""
    log_ratio = sequence_means(logprobs - old_logprobs, mask)  # (B,); masked inside
    if advantages.dim() == 2:
        advantages = sequence_means(advantages, mask)
    losses, won = _clipped_objective(torch.exp(log_ratio), advantages, clip_low, clip_high)
    has_tokens = (mask.sum(1) > 0).float()
    n = has_tokens.sum().clamp(min=1.0)
    with torch.no_grad():
        token_log_ratio = (logprobs - old_logprobs) * mask
        kl = masked_mean(torch.exp(token_log_ratio) - 1.0 - token_log_ratio, mask)
    return (losses * has_tokens).sum() / n, {"clip_frac": ((won * has_tokens).sum() / n).item(),
                                             "approx_kl": kl.item()}


@KL_ESTIMATORS.register("k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """log pi - log ref per token (B, T) -> (B, T): unbiased for KL(pi || ref) under samples of
    pi, but of either sign token by token (high variance)."""
    return logprobs - ref_logprobs


@KL_ESTIMATORS.register("k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """0.5 (log pi - log ref)^2 per token (B, T) -> (B, T): >= 0, low variance, biased."""
    return 0.5 * (logprobs - ref_logprobs) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """exp(d) - d - 1 with d = log ref - log pi, per token (B, T) -> (B, T): unbiased for
    KL(pi || ref) and >= 0 everywhere (Schulman's k3; GRPO's KL term). The log-ratio is clamped
    to [-20, 20] so one far-off token cannot overflow exp."""
    d = (ref_logprobs - logprobs).clamp(-20.0, 20.0)
    return torch.exp(d) - d - 1.0
