"""Policy losses, by name: pure tensor functions in the style of verl's core_algos.

`fn(logprobs (B, T), old_logprobs (B, T), advantages (B,), mask (B, T) float, clip_eps)
 -> (loss scalar, stats dict of floats)`. The train step looks TrainConfig.loss up in LOSSES.
"""
from typing import Callable

import torch

from flywheel.registry import Registry

LossFn = Callable[..., tuple[torch.Tensor, dict]]
LOSSES: Registry[LossFn] = Registry("loss", home=__name__)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean of x (B, T) over mask (B, T); 0 when the mask is empty."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


@LOSSES.register("grpo")
def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
) -> tuple[torch.Tensor, dict]:
    """PPO-clipped policy gradient with token-mean aggregation.

    logprobs, old_logprobs, mask: (B, T); advantages: (B,), one per sequence.
    Stats: clip_frac (share of tokens where the clipped term won), approx_kl (k3 estimate of
    KL(old || new), >= 0).
    """
    log_ratio = (logprobs - old_logprobs) * mask  # masked first: padding may hold anything
    ratio = torch.exp(log_ratio)
    adv = advantages.unsqueeze(1)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    with torch.no_grad():
        clip_frac = masked_mean((clipped > unclipped).float(), mask)
        approx_kl = masked_mean(ratio - 1.0 - log_ratio, mask)
    return loss, {"clip_frac": clip_frac.item(), "approx_kl": approx_kl.item()}
