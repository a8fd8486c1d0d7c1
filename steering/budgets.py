"""Budgets: each domain's share of an iteration's training attempts, and its task quota.

    weights      DOMAIN=W      relative share within its tier (unnamed domains: 1)
    tiers        DOMAIN=TIER   (unnamed domains: tier "default")
    tier_shares  TIER=S        a tier's share of the whole; tiers not named share what is left
                               in proportion to their domains' weights
    floor        F             the least share any domain gets (the long tail is never starved)

Without tiers a domain's share is its weight over the sum of weights. The floor is met by water
filling: domains under it are raised to it, and the others give up share in proportion to
theirs. Quotas (tasks) are shares of the batch's tasks, rounded by largest remainder so they add
up exactly, and at least one task for every domain with a share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_TIER = "default"


def _pairs(items: Iterable[str], what: str, number: bool) -> dict[str, object]:
    out = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"steering.{what} item {item!r} is not KEY=VALUE")
        if number:
            try:
                v = float(value)
            except ValueError:
                raise ValueError(f"steering.{what} item {item!r}: {value!r} is not a number") from None
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"steering.{what} item {item!r}: expected a number >= 0")
            out[key.strip()] = v
        else:
            out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class Budget:
    """The parsed budget settings (ValueError naming the setting when one is malformed)."""
    weights: dict[str, float]
    tiers: dict[str, str]
    tier_shares: dict[str, float]
    floor: float = 0.0

    @classmethod
    def parse(cls, weights: Sequence[str] = (), tiers: Sequence[str] = (),
              tier_shares: Sequence[str] = (), floor: float = 0.0) -> "Budget":
        budget = cls(_pairs(weights, "weights", True), _pairs(tiers, "tiers", False),
                     _pairs(tier_shares, "tier_shares", True), float(floor))
        if not 0.0 <= budget.floor < 1.0:
            raise ValueError(f"steering.floor {floor!r}: expected a share in [0, 1)")
        if sum(budget.tier_shares.values()) > 1.0 + 1e-9:
            raise ValueError(f"steering.tier_shares {list(tier_shares)}: the shares add up to "
                             f"{sum(budget.tier_shares.values()):g}, more than 1")
        return budget

    def is_default(self) -> bool:
        return not (self.weights or self.tiers or self.tier_shares or self.floor)

    def named_domains(self) -> set[str]:
        return set(self.weights) | set(self.tiers)

    def shares(self, domains: Iterable[str]) -> dict[str, float]:
        """Each of `domains`' share of the attempts (they add up to 1)."""
        domains = sorted(set(domains))
        if not domains:
            return {}
        weight = {d: self.weights.get(d, 1.0) for d in domains}
        tier = {d: self.tiers.get(d, DEFAULT_TIER) for d in domains}
        members: dict[str, list[str]] = {}
        for d in domains:
            members.setdefault(tier[d], []).append(d)
        named = {t: s for t, s in self.tier_shares.items() if t in members}
        rest = [t for t in members if t not in named]
        tier_share = dict(named)
        left = max(0.0, 1.0 - sum(named.values()))
        rest_weight = sum(weight[d] for t in rest for d in members[t])
        for t in rest:
            mass = sum(weight[d] for d in members[t])
            tier_share[t] = left * mass / rest_weight if rest_weight > 0 else left / len(rest)
        total = sum(tier_share.values())
        if total <= 0:  # every weight and share is zero: fall back to equal shares
            return {d: 1.0 / len(domains) for d in domains}
        shares = {}
        for t, ds in members.items():
            mass = sum(weight[d] for d in ds)
            for d in ds:
                within = weight[d] / mass if mass > 0 else 1.0 / len(ds)
                shares[d] = tier_share[t] / total * within
        return with_floor(shares, self.floor)


def with_floor(shares: dict[str, float], floor: float) -> dict[str, float]:
    """`shares` with every one raised to at least `floor` (at most 1/len(shares)), the others
    scaled down in proportion, so they still add up to 1."""
    if not shares or floor <= 0:
        return dict(shares)
    floor = min(floor, 1.0 / len(shares))
    fixed: set[str] = set()
    while True:
        free = {d: s for d, s in shares.items() if d not in fixed}
        mass = sum(free.values())
        room = 1.0 - floor * len(fixed)
        scaled = {d: (s * room / mass if mass > 0 else room / len(free)) for d, s in free.items()}
        low = {d for d, s in scaled.items() if s < floor - 1e-12}
        if not low:
            return {**{d: floor for d in fixed}, **scaled}
        fixed |= low


def quotas(shares: dict[str, float], tasks: int, at_least_one: bool = True) -> dict[str, int]:
    """`tasks` split by `shares` into whole tasks: largest remainder, at least 1 per domain with a
    positive share when `at_least_one` (which may take the total over `tasks` when it is smaller
    than the domains)."""
    exact = {d: s * tasks for d, s in shares.items()}
    out = {d: int(math.floor(v)) for d, v in exact.items()}
    left = tasks - sum(out.values())
    for d in sorted(exact, key=lambda d: (out[d] - exact[d], d))[:max(0, left)]:
        out[d] += 1
    floor = 1 if at_least_one else 0
    return {d: max(q, floor if shares[d] > 0 else 0) for d, q in out.items()}


def quotas_within(shares: dict[str, float], tasks: int, capacity: dict[str, int],
                  at_least_one: bool = True) -> dict[str, int]:
    """`quotas`, where no domain gets more than its `capacity` (the candidates it has): what a
    domain cannot use goes to the others by their shares, until every task is placed or every
    domain is full. A small task file then hands its unused share on instead of leaving the
    batch short."""
    full: dict[str, int] = {}
    while True:
        free = {d: s for d, s in shares.items() if d not in full}
        mass = sum(free.values())
        left = tasks - sum(full.values())
        if not free or left <= 0:
            return {**{d: 0 for d in free}, **full}
        split = quotas({d: s / mass for d, s in free.items()} if mass > 0 else
                       {d: 1.0 / len(free) for d in free}, left, at_least_one)
        over = {d for d, q in split.items() if q > capacity.get(d, 0)}
        if not over:
            return {**split, **full}
        full.update({d: capacity.get(d, 0) for d in over})
