"""One policy update: rows of trajectories in, optimizer steps out.

`train_on_minibatches` is the RL step (PPO-style epochs over shuffled minibatches, the loss and
its aggregation by name from the run's `Algorithm`, optional KL to a frozen reference) over any
`MinibatchSource`: rows in memory (`train_on_rows`) or streamed from Parquet
(trainer/trajectory_stream.py, what train_iteration uses); both draw the same minibatches from the
same seed. The step itself is trainer/update_loop.py's, with `RLObjective` as its loss.
"""
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import torch

from flywheel.trainer.aggregation import masked_mean
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.credit import carried_advantages, has_signal
from flywheel.trainer import distributed
from flywheel.trainer.losses import KL_ESTIMATORS, LOSSES
from flywheel.trainer.off_policy import NO_WEIGHTS, OFF_POLICY_MODES, behaviour_weights
from flywheel.policy.policy import Policy
from flywheel.trainer.segments import segment_rows
from flywheel.trainer.trajectory_batches import first_scored, make_batch
from flywheel.trainer.update_loop import microbatches, run_update, trained_tokens


@dataclass(frozen=True)
class TrainConfig:
    """How the trainer optimizes; what it optimizes (loss, aggregation, credit) is the run's
    `Algorithm` (trainer/algorithm.py)."""
    lr: float = 5e-4
    epochs: int = 2                   # passes over an iteration's trajectories per update
    minibatch_size: int = 128         # rows per optimizer step
    clip_low: float | None = None     # None: the loss's own default (its paper's)
    clip_high: float | None = None    # the upper clip of the ratio; None: the loss's own
    norm_length: int = 0              # dr_grpo's constant; 0: the longest response of the update
    kl_coef: float = 0.0              # > 0 adds kl_coef * KL(policy || reference) to the loss
    kl_estimator: str = "k3"          # a name in KL_ESTIMATORS
    micro_tokens: int = 0             # most padded tokens per forward/backward (gradient
                                      # accumulation within a minibatch); 0: the whole minibatch
    max_grad_norm: float = 1.0        # gradients are clipped to this global norm
    weight_decay: float = 0.0         # AdamW's weight decay
    betas: tuple[float, float] = (0.9, 0.99)  # Adam's (beta1, beta2)
    off_policy: str = "decoupled"     # rows sampled by older weights (overlap): decoupled |
                                      # behaviour (trainer/off_policy.py)
    is_cap: float = 2.0               # decoupled: the cap of the importance weights pi_prox / pi_b

    def __post_init__(self):
        if self.off_policy not in OFF_POLICY_MODES:
            raise ValueError(f"unknown off_policy {self.off_policy!r}: known ones are "
                             f"{', '.join(OFF_POLICY_MODES)}")
        if not self.is_cap >= 1.0:
            raise ValueError(f"is_cap must be >= 1 (a weight cap below 1 shrinks every token), "
                             f"got {self.is_cap}")

    def to_dict(self) -> dict:
        return asdict(self)

    def loss_overrides(self, rows: list[dict]) -> dict:
        """The keywords this config sets for the loss (unset ones keep the loss's defaults)."""
        return self.loss_overrides_for(max((len(r["response_token_ids"]) for r in rows), default=0))

    def loss_overrides_for(self, longest_response: int) -> dict:
        """loss_overrides, given the longest response of the update rather than its rows."""
        set_ = {"clip_low": self.clip_low, "clip_high": self.clip_high}
        norm = self.norm_length or longest_response
        return {**{k: v for k, v in set_.items() if v is not None}, "norm_length": norm or None}

    def adamw(self) -> dict:
        """The optimizer's hyperparameters, for build_optimizer and apply_hyperparams."""
        return {"lr": self.lr, "betas": self.betas, "weight_decay": self.weight_decay}


class MinibatchSource(Protocol):
    """The rows of one update that carry signal (trainer/credit.py `has_signal` under the run's
    credit), however stored.

    `minibatches(order, size)` yields lists of row dicts: the rows numbered order[0:size], then
    order[size:2*size], ..., where row i is the i-th row with signal in table order. The sizes
    are known before any row is drawn (the loss's norm_length needs the longest response).
    With `rank`, `world` (a data-parallel update, trainer/distributed.py) each minibatch is only
    this rank's share of it, its rows rank, rank + world, ...: possibly none, still yielded.
    """
    n_sequences: int      # rows with signal
    n_tokens: int         # their response tokens
    longest_response: int
    n_non_finite: int     # rows with signal carrying a NaN or infinite advantage

    def minibatches(self, order: np.ndarray, size: int, rank: int = 0,
                    world: int = 1) -> Iterator[list[dict]]: ...


class RowsInMemory:
    """A MinibatchSource over a list of row dicts (tests, benchmarks, small updates)."""

    def __init__(self, rows: list[dict], credit: str = "outcome"):
        self.rows = [r for r in rows if has_signal(r, credit)]
        self.n_sequences = len(self.rows)
        self.n_tokens = sum(len(r["response_token_ids"]) for r in self.rows)
        self.longest_response = max((len(r["response_token_ids"]) for r in self.rows), default=0)
        self.n_non_finite = sum(not np.all(np.isfinite(carried_advantages(r, credit)))
                                for r in self.rows)

    def minibatches(self, order: np.ndarray, size: int, rank: int = 0,
                    world: int = 1) -> Iterator[list[dict]]:
        for start in range(0, len(order), size):
            yield [self.rows[i] for i in order[start : start + size][rank::world]]


def train_on_rows(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    rows: list[dict],
    cfg: TrainConfig,
    seed: int,
    device: str | torch.device = "cpu",
    reference: Policy | None = None,
    algorithm: Algorithm = Algorithm(),
) -> dict:
    """train_on_minibatches over rows held in memory."""
    return train_on_minibatches(policy, optimizer, RowsInMemory(rows, algorithm.credit), cfg,
                                seed, device, reference, algorithm)


def train_on_minibatches(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    source: MinibatchSource,
    cfg: TrainConfig,
    seed: int,
    device: str | torch.device = "cpu",
    reference: Policy | None = None,
    algorithm: Algorithm = Algorithm(),
    start_digest: str | None = None,
    proximal: Policy | None = None,
) -> dict:
    """`cfg.epochs` passes of minibatch updates over the rows that carry signal, with
    `algorithm`'s loss, aggregation and credit.

    Rows without signal (filtered, or every advantage they carry 0) are left out by the source,
    selected under algorithm.credit (they add no gradient, only cost). Each epoch draws a fresh
    permutation of all of them from `seed`, so the minibatches do not depend on how the rows are
    stored. `reference` (frozen, eval mode) is
    required when cfg.kl_coef > 0. Returns, averaged over steps: loss, pg_loss, clip_frac,
    approx_kl (to the sampling policy), grad_norm (pre-clip), entropy (Monte-Carlo: the mean of
    -log pi over the sampled tokens), kl (to the reference, when one is used);
    logprob_diff_mean/max: |training - sampling log-prob| of the same ids, measured on the first
    microbatch before any step (a mismatch that grows means the trainer does not train the policy
    that sampled); and counts.

    Rows whose `checkpoint_digest` is another than `start_digest` (the weights the update starts
    from) were sampled by an older policy: with `proximal` (a frozen copy of the starting
    weights) and cfg.off_policy "decoupled", their ratio is taken against the proximal policy
    and their tokens weighted by trainer/off_policy.py's capped importance weights, whose
    statistics (is_weight_mean, is_weight_max, is_clip_frac) join the returned ones. Without a
    start digest every row is trained as the sampler's own.

    Inside a process group (a torchrun launch, trainer/distributed.py) the update is data
    parallel: each rank trains on its share of every minibatch, the gradients are summed over
    ranks before clipping, and every rank returns the stats a single process would.
    """
    if cfg.kl_coef > 0 and reference is None:
        raise ValueError(f"kl_coef={cfg.kl_coef} needs a reference policy")
    if source.n_non_finite:
        raise ValueError("non-finite advantage in trajectories: refusing to train on them")
    names = ["loss", "pg_loss", "clip_frac", "approx_kl", "grad_norm", "entropy"]
    names += ["kl"] if cfg.kl_coef > 0 else []
    correcting = proximal is not None and start_digest is not None and cfg.off_policy == "decoupled"
    names += ["is_weight_mean", "is_weight_max", "is_clip_frac"] if correcting else []
    stats = dict.fromkeys(names, 0.0)
    counts = {"n_sequences": source.n_sequences, "n_tokens": source.n_tokens, "n_steps": 0}
    if not source.n_sequences:  # nothing trained: nothing weighted either
        return {**stats, **(NO_WEIGHTS if correcting else {}), **counts}
    rng = np.random.default_rng(seed)
    overrides = {**cfg.loss_overrides_for(source.longest_response),
                 "aggregation": algorithm.loss_aggregation()}
    objective = RLObjective(policy, cfg, algorithm, overrides, reference, device, list(stats),
                            start_digest, proximal if correcting else None)
    rank, ranks = distributed.world()

    def minibatches(epoch: int):  # a fresh permutation of the rows with signal, each epoch
        order = rng.permutation(source.n_sequences)
        shards = {"rank": rank, "world": ranks} if ranks > 1 else {}
        return source.minibatches(order, cfg.minibatch_size, **shards)

    history = run_update(policy, optimizer, minibatches, objective, epochs=cfg.epochs,
                         micro_tokens=cfg.micro_tokens, max_grad_norm=cfg.max_grad_norm,
                         device=device)
    for step_stats in (s for steps in history for s in steps):
        counts["n_steps"] += 1
        for k in stats:
            stats[k] += step_stats[k]
    return {**{k: v / counts["n_steps"] for k, v in stats.items()}, **objective.diff, **counts}


class RLObjective:
    """The RL loss of one minibatch for the update loop (trainer/update_loop.py), over
    microbatches of at most cfg.micro_tokens padded tokens: each microbatch's loss weighted by its
    share of the units its aggregation averages over (trained tokens, or sequences that have
    some) and its KL term by its share of the trained tokens, so the sum is the whole
    minibatch's gradient."""

    def __init__(self, policy: Policy, cfg: TrainConfig, algorithm: Algorithm, overrides: dict,
                 reference: Policy | None, device, names: list[str],
                 start_digest: str | None = None, proximal: Policy | None = None):
        self.policy, self.cfg, self.overrides, self.device = policy, cfg, overrides, device
        self.names = names  # the stats of a step (grad_norm aside, which the loop measures)
        self.start_digest, self.proximal = start_digest, proximal
        self.credit = algorithm.credit
        self.reference = reference if cfg.kl_coef > 0 else None
        self.loss_fn, self.unit = LOSSES.get(algorithm.loss), algorithm.loss_unit()
        self.kl_fn = KL_ESTIMATORS.get(cfg.kl_estimator)
        self.diff: dict = {}
        # to add up over ranks (reduce): the first microbatch's |logprob gap| (sum, count, max),
        # the off-policy weights' of a step (stale tokens, weight sum, capped, max)
        self.gap_parts, self.diff_reduced, self.is_parts = [], False, [0.0, 0.0, 0.0, -np.inf]

    def microbatches(self, share: list[dict], micro_tokens: int) -> list[list[dict]]:
        rows = [s for row in share for s in segment_rows(row)]  # each context as it was seen
        return microbatches(rows, micro_tokens) if rows else []

    def units(self, micro: list[dict]) -> tuple[int, int]:
        """(the loss's units: trained tokens, or sequences that have some; trained tokens)."""
        tokens = sum(map(trained_tokens, micro))
        return (tokens if self.unit == "token" else sum(trained_tokens(r) > 0 for r in micro),
                tokens)

    def loss(self, micro: list[dict], totals) -> tuple[torch.Tensor, dict]:
        n_units, n_tokens = self.units(micro)
        w, w_tok = n_units / max(totals[0], 1), n_tokens / max(totals[1], 1)
        loss, stats = self._loss(micro, w, w_tok)  # pg_loss as the loss weighs it, the rest
        return loss, {k: v * (w if k == "pg_loss" else w_tok) for k, v in stats.items()}  # by tokens

    def reduce(self, figures: dict, ranks: int) -> dict:
        """The step's stats of `names`: this process's own (one process), or those a single
        process would return for the whole minibatch, from every rank's share."""
        if ranks == 1:
            figures["loss"] = figures["pg_loss"] + self.cfg.kl_coef * figures.get("kl", 0.0)
            self.is_parts = [0.0, 0.0, 0.0, -np.inf]
            return figures
        summed = [k for k in self.names if k not in ("loss", "grad_norm") and not k.startswith("is_")]
        first = not self.diff_reduced  # the step that measured the logprob gap (see _loss)
        gap = self.gap_parts if first and self.gap_parts else [0.0, 0.0, -np.inf]
        sums = distributed.all_reduce([figures.get(k, 0.0) for k in summed] + self.is_parts[:3]
                                      + gap[:2])
        highest = distributed.all_reduce([self.is_parts[3], gap[2]], op="max")
        self.is_parts = [0.0, 0.0, 0.0, -np.inf]
        stats = dict(zip(summed, sums))
        stats["loss"] = stats["pg_loss"] + self.cfg.kl_coef * stats.get("kl", 0.0)
        n_stale, weights, capped, gap_sum, gap_count = sums[len(summed):]
        if any(k.startswith("is_") for k in self.names):  # as _off_policy reports them, minibatch-wide
            stats.update({"is_weight_mean": weights / n_stale, "is_weight_max": highest[0],
                          "is_clip_frac": capped / n_stale} if n_stale else NO_WEIGHTS)
        if first:  # every rank now holds the whole first minibatch's figures
            self.diff_reduced = True
            self.diff = {"logprob_diff_mean": gap_sum / max(gap_count, 1.0),
                         "logprob_diff_max": highest[1]}
        return stats

    def _loss(self, rows: list[dict], w: float, w_tok: float) -> tuple[torch.Tensor, dict]:
        policy, cfg = self.policy, self.cfg
        b = make_batch(rows, policy.pad_id, self.device, self.credit)
        mask, start = b["response_mask"], first_scored(rows)
        logprobs = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"], start)
        if not self.diff:
            gap = (logprobs.detach() - b["old_logprobs"]).abs()[mask.bool()]
            self.diff = {"logprob_diff_mean": gap.mean().item(), "logprob_diff_max": gap.max().item()}
            self.gap_parts = [gap.sum().item(), float(gap.numel()), gap.max().item()]
        old, weights, is_stats = self._off_policy(rows, b, start)
        pg_loss, stats = self.loss_fn(logprobs, old, b["advantages"], mask,
                                      token_weights=weights, **self.overrides)
        stats.update(is_stats)
        loss = w * pg_loss
        stats.update(pg_loss=pg_loss.item(), entropy=-masked_mean(logprobs.detach(), mask).item())
        if self.reference is not None:
            with torch.no_grad():
                ref = self.reference.token_logprobs(b["input_ids"], b["attn_mask"],
                                                    b["temperatures"], start)
            kl = masked_mean(self.kl_fn(logprobs, ref), mask)
            loss = loss + w_tok * cfg.kl_coef * kl
            stats["kl"] = kl.item()
        return loss, stats

    def _off_policy(self, rows: list[dict], b: dict, start: int):
        """(old log-probs, token weights or None, stats) for the loss: the sampler's and none,
        unless some rows were sampled by older weights and a proximal policy is held; then
        those rows' old log-probs are the proximal policy's and their tokens are weighted."""
        if self.proximal is None:  # a synchronous update: nothing to look at per row
            return b["old_logprobs"], None, {}
        stale = [r.get("checkpoint_digest") not in (None, self.start_digest) for r in rows]
        if not any(stale):
            return b["old_logprobs"], None, dict(NO_WEIGHTS)
        mask = b["response_mask"]
        stale_rows = torch.tensor(stale, device=mask.device)[:, None]
        with torch.no_grad():
            proximal = self.proximal.token_logprobs(b["input_ids"], b["attn_mask"],
                                                    b["temperatures"], start)
        weights, stats = behaviour_weights(proximal, b["old_logprobs"], mask * stale_rows,
                                           self.cfg.is_cap)
        n = (mask * stale_rows).sum().item()
        if n:  # the same figures as sums over the stale tokens, to add up over ranks
            parts = self.is_parts
            self.is_parts = [parts[0] + n, parts[1] + stats["is_weight_mean"] * n,
                             parts[2] + stats["is_clip_frac"] * n,
                             max(parts[3], stats["is_weight_max"])]
        return (torch.where(stale_rows, proximal, b["old_logprobs"]),
                torch.where(stale_rows, weights, mask), stats)
