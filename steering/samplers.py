"""Samplers: which of a domain's candidate tasks an iteration trains on (a registry).

A sampler sorts each candidate into a class by its history (steering/history.py `TaskStats`) and
gives it a weight; `select` then fills the domain's quota class by class:

    retry     the last visit was lost to the environment; retried up to `env_retries` times
    error     failed in a recurring pattern (the error set); `error_share` of the quota,
              spread evenly over the patterns so that a rare failure is revisited too
    band      curriculum: seen, pass rate inside the target band; the rest of the quota
    unseen    never attempted                                    } `explore` of the quota
    outside   seen, pass rate outside the band; a task solved by } (curriculum), weighted;
              every attempt weighs `solved_decay` per such visit  } uniform: everything is `any`

Within a class, tasks are taken by weighted sampling without replacement (Efraimidis-Spirakis:
the smallest -log(u)/w first), u a hash of (seed, iteration, task id), so a selection depends on
nothing but the run's seed, the iteration and the tables: a resumed run selects the same tasks.
A class short of candidates leaves its quota to the others, in the order of `LEFTOVER_ORDER`:
the error set takes more than its share only when nothing else is left.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass

from flywheel.registry import Registry
from flywheel.steering.history import TaskStats

FILL_ORDER = ("retry", "error", "band", "any", "unseen", "outside")
LEFTOVER_ORDER = ("band", "any", "unseen", "outside", "error")


@dataclass(frozen=True)
class Policy:
    """The sampler's settings (settings/config.py SteeringSettings' curriculum part)."""
    band: tuple[float, float] = (0.2, 0.8)
    explore: float = 0.25
    solved_decay: float = 0.25
    error_share: float = 0.0
    env_retries: int = 2

    @classmethod
    def from_settings(cls, s) -> "Policy":
        try:
            low, high = (float(x) for x in str(s.band).split(","))
        except ValueError:
            raise ValueError(f"steering.band {s.band!r}: expected LOW,HIGH pass rates") from None
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"steering.band {s.band!r}: expected 0 <= LOW <= HIGH <= 1")
        for name in ("explore", "error_share", "solved_decay"):
            if not 0.0 <= float(getattr(s, name)) <= 1.0:
                raise ValueError(f"steering.{name} {getattr(s, name)!r}: expected a share in [0, 1]")
        if float(s.explore) + float(s.error_share) > 1.0:
            raise ValueError(f"steering.explore + steering.error_share = "
                             f"{float(s.explore) + float(s.error_share):g}: more than the whole quota")
        if int(s.env_retries) < 0:
            raise ValueError(f"steering.env_retries {s.env_retries!r}: expected >= 0")
        return cls((low, high), float(s.explore), float(s.solved_decay), float(s.error_share),
                   int(s.env_retries))


@dataclass(frozen=True)
class Candidate:
    task_id: str
    klass: str
    weight: float = 1.0
    pattern: str = ""


class Sampler:
    """Base: `classify` one candidate; `class_quotas` splits a domain's quota over classes."""

    def classify(self, task_id: str, stats: TaskStats | None, policy: Policy) -> Candidate:
        raise NotImplementedError

    def class_quotas(self, quota: int, policy: Policy) -> dict[str, int]:
        raise NotImplementedError


def _retry_or_error(task_id: str, stats: TaskStats | None, policy: Policy) -> Candidate | None:
    if stats is None:
        return None
    if stats.last_env_failed and stats.env_failed_visits <= policy.env_retries:
        return Candidate(task_id, "retry")
    rate = stats.last_pass_rate
    if policy.error_share > 0 and stats.pattern and rate is not None and rate < policy.band[0]:
        return Candidate(task_id, "error", 1.0, stats.pattern)
    return None


SAMPLERS: Registry[Sampler] = Registry("sampler", home="flywheel.steering.samplers")


@SAMPLERS.register("uniform")
class Uniform(Sampler):
    """Every task alike (as an unsteered run), but for environment retries and the error set."""

    def classify(self, task_id, stats, policy):
        return _retry_or_error(task_id, stats, policy) or Candidate(task_id, "any")

    def class_quotas(self, quota, policy):
        error = round(policy.error_share * quota)
        return {"error": error, "any": quota - error}


@SAMPLERS.register("curriculum")
class Curriculum(Sampler):
    """Prefer tasks whose pass rate lies in the band; keep `explore` for unseen and outside ones;
    a task every attempt solved fades by `solved_decay` per such visit."""

    def classify(self, task_id, stats, policy):
        special = _retry_or_error(task_id, stats, policy)
        if special:
            return special
        rate = None if stats is None else stats.last_pass_rate
        if rate is None:
            return Candidate(task_id, "unseen")
        low, high = policy.band
        if low <= rate <= high:
            return Candidate(task_id, "band")
        return Candidate(task_id, "outside", policy.solved_decay ** stats.solved_visits)

    def class_quotas(self, quota, policy):
        error = round(policy.error_share * quota)
        explore = round(policy.explore * quota)
        return {"error": error, "band": max(0, quota - error - explore),
                "unseen": explore, "outside": 0}


def priority(seed: int, iteration: int, task_id: str, weight: float) -> float:
    """Efraimidis-Spirakis key -log(u)/w (smaller is taken first); inf for weight 0."""
    digest = hashlib.sha256(f"{seed}/{iteration}/{task_id}".encode()).digest()
    u = (int.from_bytes(digest[:8], "big") + 0.5) / 2.0 ** 64
    return -math.log(u) / weight if weight > 0 else math.inf


def select(candidates: Iterable[Candidate], quota: int, class_quotas: dict[str, int],
           seed: int, iteration: int) -> list[Candidate]:
    """Up to `quota` of `candidates`: retries first, then each class up to its quota, then any
    quota left from the remaining candidates (LEFTOVER_ORDER, then priority)."""
    by_class: dict[str, list[tuple[float, Candidate]]] = {}
    for c in candidates:
        by_class.setdefault(c.klass, []).append((priority(seed, iteration, c.task_id, c.weight), c))
    for pool in by_class.values():
        pool.sort(key=lambda pc: (pc[0], pc[1].task_id))
    by_class["error"] = _round_robin(by_class.get("error", []))
    chosen: list[Candidate] = []
    taken: set[str] = set()

    def take(klass: str, n: int) -> None:
        for p, c in by_class.get(klass, []):
            if n <= 0 or len(chosen) >= quota:
                return
            if c.task_id not in taken and p != math.inf:
                chosen.append(c)
                taken.add(c.task_id)
                n -= 1

    take("retry", quota)
    for klass in FILL_ORDER[1:]:
        take(klass, class_quotas.get(klass, 0))
    for klass in LEFTOVER_ORDER:
        take(klass, quota)
    return chosen


def _round_robin(pool: list[tuple[float, Candidate]]) -> list[tuple[float, Candidate]]:
    """The error class ordered pattern by pattern: the best of each pattern, then the second..."""
    by_pattern: dict[str, list[tuple[float, Candidate]]] = {}
    for pc in pool:
        by_pattern.setdefault(pc[1].pattern, []).append(pc)
    out, rank = [], 0
    while len(out) < len(pool):
        for pattern in sorted(by_pattern):
            if rank < len(by_pattern[pattern]):
                out.append(by_pattern[pattern][rank])
        rank += 1
    return out
