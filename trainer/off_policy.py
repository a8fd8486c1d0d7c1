"""Off-policy correction for rows sampled by an older policy than the one the update starts from.

With rollout and training overlapped (`[overlap] max_staleness = s`, issue 25), iteration k's
rows are sampled by policy version k-1-s while its update starts from version k-1. Three
policies are then in play, as in AReaL's decoupled PPO (Fu et al. 2025):

    behaviour  pi_b     the sampler's, whose log-probabilities the rows store
    proximal   pi_prox  the update's starting weights (checkpoint k-1), recomputed here
    current    pi       the weights being optimized

The loss clips the ratio pi / pi_prox (the trust region is around the weights the update starts
from, as in synchronous PPO) and weighs each token by w = min(pi_prox / pi_b, cap): truncated
importance sampling (Ionides 2008; Yao et al. 2025 use the same weight for a sampler whose
numerics differ from the trainer's), so a token the old policy liked much more than the
proximal one cannot take over the gradient. The weights carry no gradient.

Modes (`[train] off_policy`):
    decoupled  the above (default)
    behaviour  no correction: the ratio is taken against the behaviour policy (plain PPO on
               stale rows; its clip then measures the distance to a policy the update never held)

Rows sampled by the starting weights themselves (every row of a synchronous run) take neither:
their proximal and behaviour policies are the same weights, so nothing is recomputed and the
update is the synchronous one exactly.
"""
from __future__ import annotations

import logging
from collections import Counter

import torch

from flywheel.trainer.aggregation import masked_mean

log = logging.getLogger(__name__)

OFF_POLICY_MODES = ("decoupled", "behaviour")
LOG_WEIGHT_BOUND = 20.0


class StalePolicyError(ValueError):
    """Trajectory rows were sampled from weights the update may not train on: not its starting
    checkpoint nor one of the `max_staleness` versions before it."""


# The importance-weight figures where no token was weighted: the identity, nothing clipped.
NO_WEIGHTS = {"is_weight_mean": 1.0, "is_weight_max": 1.0, "is_clip_frac": 0.0}


def behaviour_weights(proximal_logprobs: torch.Tensor, behaviour_logprobs: torch.Tensor,
                      mask: torch.Tensor, cap: float) -> tuple[torch.Tensor, dict]:
    """(weights (B, T), stats): w = min(exp(log pi_prox - log pi_b), cap) at the mask's tokens,
    0 elsewhere, without gradient.

    Stats over the masked tokens: is_weight_mean (after the cap), is_weight_max (before it),
    is_clip_frac (share of tokens the cap lowered)."""
    with torch.no_grad():
        log_w = ((proximal_logprobs - behaviour_logprobs) * mask).clamp(-LOG_WEIGHT_BOUND,
                                                                        LOG_WEIGHT_BOUND)
        raw = torch.exp(log_w)
        capped = raw.clamp(max=cap) * mask
        on = mask.bool()
        stats = {"is_weight_mean": masked_mean(capped, mask).item(),
                 "is_weight_max": raw[on].max().item() if on.any() else 0.0,
                 "is_clip_frac": masked_mean((raw > cap).float(), mask).item()}
    return capped, stats


def check_staleness(digests: Counter, allowed: dict[str, int], trajectories_uri: str,
                    checkpoint_uri: str) -> dict:
    """The one rule for which weights an update may train on: rows sampled from a digest outside
    `allowed` ({digest: versions behind the update's start; 0 for the start, `checkpoint_uri`,
    and 1, 2, ... for the older checkpoints an overlapped or reviewed update may read}) are
    refused (StalePolicyError, `stale_rows_refusal`'s message); rows that record no digest
    (tables of schema 1.0) pass as fresh, with a warning. Returns the rows' staleness figures:
    stale_rows, staleness_mean, staleness_max.

    `digests` counts rows by the digest they record (None: none), as the rows streamed past."""
    found = Counter(digests)
    total = sum(found.values())
    unknown = found.pop(None, 0)
    start = next(d for d, behind in allowed.items() if behind == 0)
    outside = {d: n for d, n in found.items() if d not in allowed}
    if outside:
        raise StalePolicyError(stale_rows_refusal(outside, total, trajectories_uri, checkpoint_uri,
                                                  start, max(allowed.values())))
    if unknown:
        log.warning("%s: %d of %d trajectory rows record no checkpoint_digest (tables of schema "
                    "1.0 have none): cannot check they were sampled from %s (%s)",
                    trajectories_uri, unknown, total, checkpoint_uri, start)
    known = sum(found.values())
    behind = sum(allowed[d] * n for d, n in found.items())
    return {"stale_rows": sum(n for d, n in found.items() if allowed[d] > 0),
            "staleness_mean": behind / known if known else 0.0,
            "staleness_max": max((allowed[d] for d in found), default=0)}


def stale_rows_refusal(outside: dict[str, int], total: int, trajectories_uri: str,
                       checkpoint_uri: str, start: str, older: int) -> str:
    """The refusal's message: how many rows came from which other weights, and which weights
    the update starts from and may read (the start and the `older` versions before it)."""
    listed = ", ".join(f"{n} row(s) from {d}" for d, n in sorted(outside.items()))
    before = (f" nor one of the {older} version(s) before it (max_staleness {older})"
              if older else "")
    return (f"{trajectories_uri}: {sum(outside.values())} of {total} trajectory rows were not "
            f"sampled from the checkpoint the trainer starts from ({checkpoint_uri}, digest "
            f"{start}){before}: {listed}; the rollout sampled a stale or other policy, so refusing "
            "to train on them")