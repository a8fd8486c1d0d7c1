"""Policy losses and KL estimators, by name: pure tensor functions in the style of verl's core_algos.

Every loss has one signature, so the train step calls any of them the same way:

    loss, stats = LOSSES.get(name)(logprobs, old_logprobs, advantages, mask, **overrides)

logprobs, old_logprobs, mask: (B, T), mask 1.0 at trained tokens; advantages: (B, T), one per
token (trainer/credit.py `token_advantages`), or (B,), one per sequence. Each loss builds a
(B, T) matrix of per-token terms and averages it with `aggregation` (trainer/aggregation.py,
verl's `agg_loss`); the keyword's default is the loss's paper's, a run may choose another.
Keywords clip_low, clip_high (the ratio's trust region [1 - low, 1 + high]) and norm_length
(the `seq-mean-token-sum-norm` constant) likewise default to each paper's. `token_weights`
(B, T), without gradient, multiply the per-token terms before aggregation: the off-policy
weights of rows sampled by an older policy (trainer/off_policy.py); None: all 1.

    grpo     token ratio, seq-mean-token-mean (GRPO paper)
    dapo     token ratio, token-mean, clip-higher 0.2 / 0.28
    dr_grpo  token ratio, seq-mean-token-sum-norm
    gspo     sequence ratio (geometric mean of token ratios), clip 3e-4 / 4e-4, seq-mean-token-mean

The log-ratio is clamped to [-20, 20] before exp, as verl does: one token whose log-probability
moved far (or a stale sampler's) cannot overflow the ratio; its gradient is then 0, as a clipped
token's. Stats: clip_frac (share of tokens, or of sequences for gspo, where clipping removed the
gradient) and approx_kl (k3 estimate of KL(old || new), >= 0).
"""
import inspect
from collections.abc import Callable

import torch

from flywheel.registry import Registry
from flywheel.trainer.aggregation import agg_loss, masked_mean, sequence_means

LossFn = Callable[..., tuple[torch.Tensor, dict]]
LOSSES: Registry[LossFn] = Registry("loss", home=__name__)
KlFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_ESTIMATORS: Registry[KlFn] = Registry("KL estimator", home=__name__)
LOG_RATIO_BOUND = 20.0


def default_aggregation(loss: str) -> str:
    """The aggregation loss `loss` uses unless a run chooses one: its `aggregation` keyword's default."""
    return inspect.signature(LOSSES.get(loss)).parameters["aggregation"].default


def _clipped_objective(ratio: torch.Tensor, adv: torch.Tensor, clip_low: float,
                       clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's pessimistic term max(-A r, -A clip(r)) and where clipping won (no gradient there).

    ratio and adv broadcast to the same shape; returns (losses, clipped-won as float)."""
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()


def _per_token(advantages: torch.Tensor) -> torch.Tensor:
    """(B, T) as it is, (B,) as (B, 1): either broadcasts against (B, T)."""
    return advantages if advantages.dim() == 2 else advantages.unsqueeze(1)


def _log_ratio(logprobs: torch.Tensor, old_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log(new / old) per token (B, T), 0 outside the mask (padding may hold anything), clamped."""
    return ((logprobs - old_logprobs) * mask).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def _weighted(losses: torch.Tensor, token_weights: torch.Tensor | None) -> torch.Tensor:
    """The per-token terms times their off-policy weights (trainer/off_policy.py), if any."""
    return losses if token_weights is None else losses * token_weights


def _token_ratio_loss(logprobs, old_logprobs, advantages, mask, clip_low, clip_high,
                      norm_length, aggregation, token_weights=None) -> tuple[torch.Tensor, dict]:
    """PPO-clipped token ratios, aggregated: the body of grpo, dapo and dr_grpo."""
    log_ratio = _log_ratio(logprobs, old_logprobs, mask)
    ratio = torch.exp(log_ratio)
    losses, won = _clipped_objective(ratio, _per_token(advantages), clip_low, clip_high)
    losses = _weighted(losses, token_weights)
    kl = (ratio - 1.0 - log_ratio).detach()
    return agg_loss(losses, mask, aggregation, norm_length), {
        "clip_frac": masked_mean(won, mask).item(), "approx_kl": masked_mean(kl, mask).item()}


def _token_ratio_variant(name: str, doc: str, *, clip_high: float, aggregation: str) -> LossFn:
    """A loss whose body is `_token_ratio_loss`, with its paper's defaults: grpo, dapo and dr_grpo
    differ only in the defaults of clip_high and aggregation (default_aggregation reads them)."""
    def loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
             mask: torch.Tensor, *, clip_low: float = 0.2, clip_high: float = clip_high,
             norm_length: float | None = None, aggregation: str = aggregation,
             token_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
        return _token_ratio_loss(logprobs, old_logprobs, advantages, mask, clip_low, clip_high,
                                 norm_length, aggregation, token_weights)
    loss.__name__ = loss.__qualname__ = name
    loss.__doc__ = doc + "\n\n    (B, T), (B, T), (B, T) or (B,), (B, T) -> scalar."
    return loss


grpo_loss = LOSSES.register("grpo", _token_ratio_variant("grpo_loss", """GRPO (Shao et al. 2024):
    PPO-clipped token ratios, averaged over each sequence's tokens and then over sequences, so a
    long response weighs as much as a short one in total.""",
    clip_high=0.2, aggregation="seq-mean-token-mean"))

dapo_loss = LOSSES.register("dapo", _token_ratio_variant("dapo_loss", """DAPO (Yu et al. 2025):
    clip-higher (a wider upper bound lets unlikely tokens grow, against entropy collapse) and one
    token-level mean over the whole batch, so every token weighs the same whatever the length of
    its response.""",
    clip_high=0.28, aggregation="token-mean"))

dr_grpo_loss = LOSSES.register("dr_grpo", _token_ratio_variant("dr_grpo_loss", """Dr. GRPO (Liu
    et al. 2025): the sum over a sequence's tokens divided by one constant (`norm_length`, e.g.
    the generation budget; default the batch's padded length T) instead of the sequence's own
    length, so wrong answers are not pushed to grow longer; mean over the sequences that have
    tokens. Pair it with the `dr_grpo` advantage (no std division).""",
    clip_high=0.2, aggregation="seq-mean-token-sum-norm"))


@LOSSES.register("gspo")
def gspo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
              mask: torch.Tensor, *, clip_low: float = 3e-4, clip_high: float = 4e-4,
              norm_length: float | None = None, aggregation: str = "seq-mean-token-mean",
              token_weights: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """GSPO (Zheng et al. 2025): one importance ratio per sequence, the length-normalised
    s_i = exp(mean_t(log new - log old)), clipped per sequence (hence the tiny clip range).
    Token-level noise in the ratio no longer decides the update.

    Written as the paper's GSPO-token: token t of sequence i has the ratio sg[s_i] * pi_t / sg[pi_t]
    (its value s_i, its gradient s_i * grad log pi_t) and its own advantage, so per-turn credit
    applies token by token; with one advantage per sequence and seq-mean-token-mean it is GSPO.

    (B, T), (B, T), (B, T) or (B,), (B, T) -> scalar; clip_frac is the share of sequences clipped."""
    seq_log_ratio = sequence_means(logprobs - old_logprobs, mask)  # (B,)
    token_log_ratio = seq_log_ratio.detach()[:, None] + (logprobs - logprobs.detach()) * mask
    token_ratio = torch.exp(token_log_ratio.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND))
    losses, won = _clipped_objective(token_ratio, _per_token(advantages), clip_low, clip_high)
    losses = _weighted(losses, token_weights)
    with torch.no_grad():
        log_ratio = _log_ratio(logprobs, old_logprobs, mask)
        kl = masked_mean(torch.exp(log_ratio) - 1.0 - log_ratio, mask)
    return agg_loss(losses, mask, aggregation, norm_length), {
        "clip_frac": agg_loss(won, mask, "seq-mean-token-mean").item(), "approx_kl": kl.item()}


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
    d = (ref_logprobs - logprobs).clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    return torch.exp(d) - d - 1.0
