"""The one update loop: epochs of minibatches, each one optimizer step, its gradient accumulated
over microbatches of bounded padded tokens, across data-parallel ranks, clipped, then stepped.

    steps = run_update(policy, optimizer, minibatches, objective, epochs=2, micro_tokens=4096,
                       max_grad_norm=1.0, device=device)

RL (trainer/train_step.py), supervised fine-tuning (trainer/supervised.py), preference
optimization (trainer/preference.py) and the warm start (`supervised_step`) all train through
it, each with its own `Objective`: what a microbatch's loss is and which figures it reports. So
every stage gets the same microbatching (`micro_tokens`), the same clipping and the same data
parallelism (trainer/distributed.py: under a torchrun launch each rank trains on its share of
every minibatch and the gradients are summed over ranks before clipping; FSDP-sharded modules
reduce in their backward and every rank runs as many forward/backward passes).

How a minibatch's loss is split without changing its gradient: the objective counts the units
its loss averages over in each microbatch (`units`: tokens, sequences, pairs, ...); the counts of
the whole minibatch, summed over microbatches and ranks, are handed to `loss`, which weighs the
microbatch by its share of them. The sum of the microbatches' gradients over every rank is then
the gradient of the whole minibatch's loss, as one process taking it in one piece would get.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import torch

from flywheel.policy.policy import Policy
from flywheel.trainer import distributed

# (epoch from 1) -> this rank's share of each minibatch of the epoch (possibly empty: the rank
# still joins every collective). Called at the start of each epoch, so a seeded shuffle is
# drawn in epoch order.
Minibatches = Callable[[int], Iterable[list]]


class Objective(Protocol):
    """What one stage trains for: its microbatches, their units, their loss and figures."""

    def microbatches(self, share: list, micro_tokens: int) -> list[list]:
        """This rank's share of a minibatch as microbatches of at most `micro_tokens` padded
        tokens (0: one microbatch; none for an empty share)."""

    def units(self, micro: list) -> Sequence[float]:
        """The counts the loss weighs by (e.g. trained tokens), summed over the minibatch and
        the ranks into the `totals` that `loss` gets; of no rows, zeros (as many)."""

    def loss(self, micro: list, totals: Sequence[float]) -> tuple[torch.Tensor, dict]:
        """(the microbatch's share of the minibatch's loss, to backward; its figures, which
        the loop adds up over the minibatch's microbatches)."""

    def reduce(self, figures: dict, ranks: int) -> dict:
        """The minibatch's figures from this rank's sums (a collective when ranks > 1; every
        rank calls it, with its own sums, possibly of no microbatch)."""


def shares(minibatches: Iterable[list]) -> Iterable[list]:
    """This rank's share of each of `minibatches` (rows rank, rank + world, ...): all of each
    outside a process group."""
    rank, ranks = distributed.world()
    for minibatch in minibatches:
        yield minibatch[rank::ranks] if ranks > 1 else minibatch


def summed(figures: dict, ranks: int, names: Iterable[str]) -> dict:
    """`Objective.reduce` for figures that are sums: each of `names` (every figure the objective
    reports), summed over ranks. The names are the objective's, not the figures' own: a rank whose
    share of a minibatch is empty has none, and every rank must reduce the same values."""
    names = sorted(names)
    if ranks == 1:
        return {k: figures.get(k, 0.0) for k in names}
    return dict(zip(names, distributed.all_reduce([figures.get(k, 0.0) for k in names])))


def clip_gradients(module: torch.nn.Module, max_grad_norm: float) -> float:
    """Clip the gradient of `module`'s parameters to `max_grad_norm` (inf: measure only) and
    return its norm before clipping (FSDP: of the whole, not of this rank's shard)."""
    norm = torch.nn.utils.clip_grad_norm_(module.parameters(), max_grad_norm)
    if hasattr(norm, "full_tensor"):  # FSDP: a DTensor, the norm of all shards
        norm = norm.full_tensor()
    return norm.item()


@torch.enable_grad()  # training needs autograd even if a caller switched it off globally
def run_update(policy: Policy, optimizer: torch.optim.Optimizer, minibatches: Minibatches,
               objective: Objective, *, epochs: int, micro_tokens: int = 0,
               max_grad_norm: float = 1.0, device: str | torch.device = "cpu",
               on_step: Callable[[int, dict], None] | None = None,
               on_epoch: Callable[[int, list[dict]], None] | None = None) -> list[list[dict]]:
    """`epochs` passes; in each, one optimizer step per minibatch of `minibatches(epoch)`.
    Returns each epoch's steps' figures (the objective's, reduced over ranks, and grad_norm:
    the norm before clipping). `on_step(epoch, figures)` follows each step; `on_epoch(epoch,
    its steps' figures)` each epoch (the policy is in train mode again at the next one's start)."""
    history = []
    for epoch in range(1, epochs + 1):
        policy.module.train()
        steps = []
        for share in minibatches(epoch):
            optimizer.zero_grad(set_to_none=True)
            figures = accumulate(policy, share, objective, micro_tokens, device)
            figures["grad_norm"] = clip_gradients(policy.module, max_grad_norm)
            optimizer.step()
            steps.append(figures)
            if on_step:
                on_step(epoch, figures)
        history.append(steps)
        if on_epoch:
            on_epoch(epoch, steps)
    return history


@torch.enable_grad()
def accumulate(policy: Policy, share: list, objective: Objective, micro_tokens: int = 0,
               device: str | torch.device = "cpu") -> dict:
    """Add the gradient of one minibatch to the parameters' (this rank's `share` of it, summed
    over ranks; the gradient a single process gets for the whole) and return its figures,
    reduced over ranks. Every rank calls it, with a share possibly empty."""
    rank, ranks = distributed.world()
    sharded = ranks > 1 and distributed.is_sharded(policy.module)
    micro = objective.microbatches(share, micro_tokens) if share else []
    counts = [objective.units([])] + [objective.units(m) for m in micro]  # zeros first
    totals = [sum(column) for column in zip(*counts)]
    if ranks > 1:  # the whole minibatch's units, so the ranks' gradients sum to its own
        totals = distributed.all_reduce(totals)
    if sharded:  # each forward and backward is a collective, so every rank runs as many
        most = int(distributed.all_reduce([len(micro)], op="max")[0])
        for _ in range(most - len(micro)):
            _idle_pass(policy, device)
    figures: dict = {}
    for m in micro:
        loss, parts = objective.loss(m, totals)
        loss.backward()
        for k, v in parts.items():
            figures[k] = figures.get(k, 0.0) + v
    if ranks > 1 and not sharded:  # FSDP's backward summed them
        distributed.sum_gradients(policy.module.parameters())
    return objective.reduce(figures, ranks)


def trained_tokens(row: dict) -> int:
    """The response tokens of a row the loss trains on (an episode's observations are not)."""
    mask = row.get("response_mask")
    return len(row["response_token_ids"]) if mask is None else int(sum(mask))


def microbatches(rows: list[dict], max_tokens: int) -> list[list[dict]]:
    """Consecutive rows grouped so that rows x longest (prompt + response) stays within
    `max_tokens` (a row longer than that goes alone); one group when max_tokens is 0."""
    if max_tokens <= 0:
        return [rows]
    groups: list[list[dict]] = [[]]
    longest = 0
    for r in rows:
        n = len(r["prompt_token_ids"]) + len(r["response_token_ids"])
        if groups[-1] and (len(groups[-1]) + 1) * max(longest, n) > max_tokens:
            groups.append([])
            longest = 0
        groups[-1].append(r)
        longest = max(longest, n)
    return groups


def _idle_pass(policy: Policy, device) -> None:
    """A forward and backward that add nothing to the gradient: a rank's turn in the
    collectives of an FSDP microbatch it has no rows for."""
    ids = torch.full((1, 2), policy.eos_ids[0], device=device)
    logprobs = policy.token_logprobs(ids, torch.ones_like(ids, dtype=torch.bool),
                                     torch.ones(1, device=device))
    (logprobs.sum() * 0.0).backward()


NO_CLIP = math.inf  # max_grad_norm that only measures the norm (the warm start's step)
