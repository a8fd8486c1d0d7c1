"""How a policy loss averages its per-token terms into one number: verl's `agg_loss`, by name.

    token-mean               one mean over every trained token of the batch (DAPO)
    seq-mean-token-mean      each sequence's mean over its tokens, then the mean over sequences
                             (GRPO, GSPO): a long response weighs as much as a short one
    seq-mean-token-sum       each sequence's sum over its tokens, then the mean over sequences
    seq-mean-token-sum-norm  each sequence's sum over one constant `norm_length` (default the
                             padded length T), then the mean over sequences (Dr. GRPO)

Means over sequences run over the sequences that have trained tokens (verl's run over all rows;
here a row without tokens is padding, not a zero-loss sample). Each mode has a unit, what it
averages over ("token", or "sequence": the sequences that have tokens), so the train step can
split a minibatch into microbatches and weight each one's loss by its share of those units: the
accumulated gradient is the whole minibatch's.
"""
from collections.abc import Callable

import torch

from flywheel.registry import Registry

AggregateFn = Callable[[torch.Tensor, torch.Tensor, float | None], torch.Tensor]
AGGREGATIONS: Registry[AggregateFn] = Registry("loss aggregation", home=__name__)


def register_aggregation(name: str, *, unit: str):
    """Register an aggregation `fn(loss_mat (B, T), mask (B, T), norm_length) -> scalar` whose
    average runs over `unit`s ("token" or "sequence")."""
    def add(fn: AggregateFn) -> AggregateFn:
        fn.unit = unit
        return AGGREGATIONS.register(name)(fn)
    return add


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token-mean of x (B, T) over mask (B, T); 0 when the mask is empty."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def sequence_means(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean of x (B, T) over mask (B, T) -> (B,); 0 for a sequence with no tokens."""
    return (x * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def _has_tokens(mask: torch.Tensor) -> torch.Tensor:
    """(B,) 1.0 for each sequence with a trained token, else 0.0."""
    return (mask.sum(1) > 0).float()


@register_aggregation("token-mean", unit="token")
def token_mean(loss_mat: torch.Tensor, mask: torch.Tensor, norm_length: float | None = None
               ) -> torch.Tensor:
    return masked_mean(loss_mat, mask)


@register_aggregation("seq-mean-token-mean", unit="sequence")
def seq_mean_token_mean(loss_mat: torch.Tensor, mask: torch.Tensor,
                        norm_length: float | None = None) -> torch.Tensor:
    has_tokens = _has_tokens(mask)
    return (sequence_means(loss_mat, mask) * has_tokens).sum() / has_tokens.sum().clamp(min=1.0)


@register_aggregation("seq-mean-token-sum", unit="sequence")
def seq_mean_token_sum(loss_mat: torch.Tensor, mask: torch.Tensor,
                       norm_length: float | None = None) -> torch.Tensor:
    return (loss_mat * mask).sum() / _has_tokens(mask).sum().clamp(min=1.0)


@register_aggregation("seq-mean-token-sum-norm", unit="sequence")
def seq_mean_token_sum_norm(loss_mat: torch.Tensor, mask: torch.Tensor,
                            norm_length: float | None = None) -> torch.Tensor:
    norm = float(norm_length) if norm_length else float(mask.shape[1])
    n_sequences = (mask.sum(1) > 0).sum().clamp(min=1)
    return (loss_mat * mask).sum() / (norm * n_sequences)


def agg_loss(loss_mat: torch.Tensor, mask: torch.Tensor, mode: str,
             norm_length: float | None = None) -> torch.Tensor:
    """loss_mat (B, T) and mask (B, T) -> scalar, averaged the `mode` way (see the module doc)."""
    return AGGREGATIONS.get(mode)(loss_mat, mask, norm_length)


def aggregation_unit(mode: str) -> str:
    """What `mode` averages over: "token" or "sequence"."""
    return AGGREGATIONS.get(mode).unit
