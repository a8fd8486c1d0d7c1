"""ScaleByDomain: each domain's advantages scaled so that its share of the update is chosen, not
an accident of how many tasks it has or how large its rewards are (`[algorithm] domain_scale`).

Group normalization (NormalizeRewards) makes advantages comparable within a group only: a domain
with 10x the tasks puts ~10x the advantage mass into the update, and under dr_grpo (no std
division) a domain whose rewards span 0..10 outweighs one spanning 0..1. After ROLL's
per-domain reward statistics, each domain d keeps running statistics of the attempts the trainer
learns from (its `signal_count` n and the root mean square of their advantages, `adv_rms`), as
exponential moving averages over iterations, and its advantages are multiplied by

    s_d ∝ share_d / (n_run_d * rms_run_d),   normalized so that the mean scale over the rows
                                             with signal is 1,

so each domain's advantage mass (n * rms) in the update is proportional to its target share
(equal shares unless given, e.g. from the sampling budgets). The running statistics (not this
iteration's alone) keep one small iteration from swinging its domain's weight.

"With signal" is the trainer's rule (trainer/credit.py `has_signal` over what FilterTrajectories
would flag): errors, exploits and zero-variance groups take no part and are left as they are.
Applied after FilterTrajectories the set is exactly the rows the trainer selects. The trainer
trains on the written `advantage` column and `turns[].advantage` (credit.token_advantages), so
scaling both here is what reaches the loss; the rollout and the trainer still read one Algorithm.

The statistics leave as `metrics` rows (`norm/adv_rms`, `norm/adv_rms_running`,
`norm/signal_count_running`, `norm/scale` per domain); `prior_from_metrics` reads the previous
iteration's back into the next iteration's prior.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import apache_beam as beam

from flywheel.records.attempt import Attempt
from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.credit import carried_advantages, has_signal
from flywheel.transforms.errors import count, now
from flywheel.transforms.filters import filter_reason

RUNNING_NAMES = ("norm/signal_count_running", "norm/adv_rms_running")


class DomainStats(NamedTuple):
    """One domain's statistics: this iteration's, or running (EMAs over iterations)."""
    signal_count: float   # attempts with signal
    adv_rms: float        # root mean square of the advantages their tokens carry


class DomainScale(NamedTuple):
    adv_rms: float        # this iteration's
    running: DomainStats  # after this iteration: the next one's prior
    scale: float          # what the domain's advantages are multiplied by


def domain_scales(stats: Mapping[str, DomainStats], prior: Mapping[str, DomainStats] | None = None,
                  momentum: float = 0.9, shares: Mapping[str, float] | None = None,
                  ) -> dict[str, DomainScale]:
    """Each domain's scale from this iteration's `stats` (domains with signal only) and the
    running statistics of the last iteration (`prior`; a domain without one starts from its own).

    running = momentum * prior + (1 - momentum) * this iteration's, for the count and the rms;
    scale_d = c * share_d / (n_run_d * rms_run_d), with c such that sum_d n_d * scale_d = sum_d n_d.
    `shares` are relative weights (renormalized over the domains present); a domain they do not
    name takes the mean of those they name that are present; none given: equal shares.
    """
    prior = prior or {}
    running = {d: s if d not in prior else DomainStats(
                   *(momentum * p + (1 - momentum) * x for p, x in zip(prior[d], s)))
               for d, s in stats.items()}
    weights = share_weights(list(stats), shares)
    raw = {d: weights[d] / (r.signal_count * r.adv_rms) for d, r in running.items()}
    mass = sum(s.signal_count * raw[d] for d, s in stats.items())
    if stats and mass <= 0:
        raise ValueError(f"the target shares of the domains with signal ({weights}) sum to 0")
    c = sum(s.signal_count for s in stats.values()) / mass if stats else 0.0
    return {d: DomainScale(s.adv_rms, running[d], c * raw[d]) for d, s in stats.items()}


def share_weights(domains: list[str], shares: Mapping[str, float] | None) -> dict[str, float]:
    """The target weight of each of `domains` (see domain_scales)."""
    if any(v < 0 for v in (shares or {}).values()):
        raise ValueError(f"target shares must not be negative: {dict(shares)}")
    named = [shares[d] for d in domains if shares and d in shares]
    fallback = sum(named) / len(named) if named else 1.0
    return {d: float(shares[d]) if shares and d in shares else fallback for d in domains}


def prior_from_metrics(rows: Iterable[Mapping]) -> dict[str, DomainStats]:
    """The running statistics the `norm/*` metrics rows of an iteration hold, per domain: the next
    iteration's prior. Rows of several iterations: each domain's latest; other rows are ignored,
    and a domain missing either running value has no prior."""
    latest: dict[tuple[str, str], tuple[int, float]] = {}
    for r in rows:
        key = (r["domain"], r["name"])
        if r["name"] in RUNNING_NAMES and r["domain"] != "*" and (
                key not in latest or r["iteration"] >= latest[key][0]):
            latest[key] = (r["iteration"], float(r["value"]))
    domains = {d for d, _ in latest}
    return {d: DomainStats(*(latest[d, n][1] for n in RUNNING_NAMES)) for d in sorted(domains)
            if all((d, n) in latest for n in RUNNING_NAMES)}


def carries_signal(a: Attempt, credit: str) -> bool:
    """Whether the trainer learns from `a`: FilterTrajectories would not flag it (and has not)
    and some advantage its tokens carry is not 0 (`has_signal`)."""
    row = {"filtered": a.filtered, "advantage": a.advantage, "turns": a.turns}
    return filter_reason(a) is None and has_signal(row, credit)


def mean_square(a: Attempt, credit: str) -> float:
    """The mean square of the advantages `a`'s tokens carry: one value per row, however many
    turns it has."""
    values = carried_advantages({"advantage": a.advantage, "turns": a.turns}, credit)
    return sum(v * v for v in values) / len(values)


def scaled(a: Attempt, scale: float) -> Attempt:
    """`a` with its advantage and every turn's (those that have one) multiplied by `scale`."""
    turns = [t if t.get("advantage") is None else {**t, "advantage": t["advantage"] * scale}
             for t in a.turns]
    return a.replace(advantage=a.advantage * scale, turns=turns)


def add_stats(values: Iterable[tuple[int, float]]) -> tuple[int, float]:
    """(count, sum of mean squares) partials summed: CombinePerKey's function."""
    n, total = 0, 0.0
    for c, s in values:
        n, total = n + c, total + s
    return n, total


class ScaleByDomain(beam.PTransform):
    """Train attempts in (after NormalizeRewards); {"attempts": the same attempts, those with
    signal scaled per domain, "metrics": the `norm/*` metrics rows}. `prior`: the last
    iteration's running statistics (`prior_from_metrics`); `shares`: target weights per domain.
    Under domain_scale = "none" the attempts pass unchanged and no rows are written."""

    def __init__(self, algorithm: Algorithm = Algorithm(), *, run_id: str, iteration: int,
                 policy_version: int, prior: Mapping[str, DomainStats] | None = None,
                 shares: Mapping[str, float] | None = None):
        super().__init__()
        self.algorithm = algorithm.check()
        self.run_id, self.iteration, self.policy_version = run_id, iteration, policy_version
        self.prior = {d: DomainStats(*s) for d, s in (prior or {}).items()}
        self.shares = dict(shares) if shares is not None else None
        share_weights([], self.shares)  # fail at construction on a negative share

    def expand(self, attempts):
        if self.algorithm.domain_scale == "none":
            return {"attempts": attempts | "Unscaled" >> beam.Map(lambda a: a),
                    "metrics": attempts.pipeline | "NoNormMetrics" >> beam.Create([])}
        credit = self.algorithm.credit
        scales = (attempts
                  | "WithSignal" >> beam.Filter(carries_signal, credit)
                  | "MeanSquares" >> beam.Map(
                      lambda a, c: (a.domain, (1, mean_square(a, c))), credit)
                  | "PerDomain" >> beam.CombinePerKey(add_stats)
                  | "AllDomains" >> beam.combiners.ToDict()
                  | "Scales" >> beam.Map(self._scales))
        return {"attempts": attempts | "Scale" >> beam.Map(self._scale, credit,
                                                           beam.pvalue.AsSingleton(scales)),
                "metrics": scales | "NormMetrics" >> beam.FlatMap(self._rows)}

    def _scales(self, sums: dict) -> dict[str, DomainScale]:
        stats = {d: DomainStats(n, math.sqrt(total / n)) for d, (n, total) in sums.items()}
        return domain_scales(stats, self.prior, self.algorithm.domain_momentum, self.shares)

    def _scale(self, a: Attempt, credit: str, scales: dict) -> Attempt:
        if not carries_signal(a, credit):
            return a
        count("attempts_domain_scaled")
        return scaled(a, scales[a.domain].scale)

    def _rows(self, scales: dict):
        for domain, s in sorted(scales.items()):
            for name, value in [("norm/adv_rms", s.adv_rms),
                                ("norm/adv_rms_running", s.running.adv_rms),
                                ("norm/signal_count_running", s.running.signal_count),
                                ("norm/scale", s.scale)]:
                yield {"run_id": self.run_id, "iteration": self.iteration, "domain": domain,
                       "name": name, "value": float(value), "policy_version": self.policy_version,
                       "created_at": now()}
