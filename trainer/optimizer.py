"""The one optimizer builder: AdamW over a policy's parameters.

The warm start and the RL trainer use different hyperparameters (each passes its own); they
share this builder so that a restored optimizer state always meets the same optimizer.
"""
import torch

from flywheel.policy.policy import Policy


def build_optimizer(policy: Policy, *, lr: float, betas: tuple[float, float],
                    weight_decay: float) -> torch.optim.AdamW:
    return torch.optim.AdamW(policy.module.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)


def apply_hyperparams(optimizer: torch.optim.Optimizer, *, lr: float, betas: tuple[float, float],
                      weight_decay: float) -> None:
    """Make these win over hyperparameters restored with an optimizer state (e.g. the warm start's)."""
    for group in optimizer.param_groups:
        group.update(lr=lr, betas=betas, weight_decay=weight_decay)
