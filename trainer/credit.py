"""Credit: how a group's rewards become the advantages the trainer's tokens carry, in one place.

    ADVANTAGES   group estimators: the outcomes of one group (the G attempts at one task),
                 (G,) -> (G,): grpo, dr_grpo, rloo
    CREDITS      per-turn estimators: how an episode's credit spreads over its turns, and so over
                 the tokens of each turn's action: outcome, turn

The rollout's NormalizeRewards calls `assign_credit` on each group; the trainer's make_batch calls
`token_advantages` on each batch; `has_signal` is the one rule for whether a row can move the
policy (the zero-variance flag and its filter, the trainer's selection and the metrics follow it).
A config names the estimators (`[algorithm]`: advantage, credit, discount); adding one is one
decorated function.

Decisions, with reasons:
- A tied group has no signal whatever the estimator's rounding: `group_advantages` returns exact
  zeros (the mean of eight 0.1s is not 0.1 in floating point).
- Outcome credit: every turn, every token of an attempt carries its group advantage.
- Turn credit: each turn's discounted return (`turn_returns`), normalized over all turns of the
  group's episodes by the run's group estimator. A group whose outcomes tie still has signal when
  its per-turn returns differ (one episode got there by steps that scored on the way, another in
  one jump): its rows keep their per-turn advantages and are trained on. When the returns tie
  too, every turn advantage is 0 and the group is dropped, by the same rule everywhere.
- A turn's return is the discounted outcome less the score its state had before it
  (`turn_returns`: the score as a potential, a baseline that leaves the gradient unbiased), so
  re-running the same tests five times earns nothing, where summing the partial scores, as
  returns did before, paid each re-run again.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import torch

from flywheel.registry import Registry

AdvantageFn = Callable[[np.ndarray], np.ndarray]
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator", home=__name__)
# (outcomes (G,), each attempt's turn scores or None, advantage estimator, discount)
#   -> each attempt's per-turn advantages (K_i,), or None for an attempt that is no episode
CreditFn = Callable[[np.ndarray, list, str, float], list]
CREDITS: Registry[CreditFn] = Registry("credit", home=__name__)


# Group estimators ---------------------------------------------------------------------------

@ADVANTAGES.register("grpo")
def grpo(rewards: np.ndarray) -> np.ndarray:
    """(r - mean) / (std + 1e-6), population std; (G,) -> (G,), all zero when rewards are equal."""
    r = np.asarray(rewards, dtype=np.float64)
    std = r.std()
    if std == 0:
        return np.zeros_like(r)
    return (r - r.mean()) / (std + 1e-6)


@ADVANTAGES.register("dr_grpo")
def dr_grpo(rewards: np.ndarray) -> np.ndarray:
    """r - mean, without the std division that up-weights near-uniform groups (Dr. GRPO); (G,) -> (G,)."""
    r = np.asarray(rewards, dtype=np.float64)
    return r - r.mean()


@ADVANTAGES.register("rloo")
def rloo(rewards: np.ndarray) -> np.ndarray:
    """r_i - mean of the other G-1 rewards (REINFORCE leave-one-out); (G,) -> (G,), zero if G == 1."""
    r = np.asarray(rewards, dtype=np.float64)
    g = len(r)
    if g < 2:
        return np.zeros_like(r)
    return r - (r.sum() - r) / (g - 1)


def group_advantages(values: np.ndarray, estimator: str) -> np.ndarray:
    """`estimator`'s advantages of one group's values, (G,) -> (G,) float64; exact zeros when
    fewer than two values or all equal (no estimator's rounding may invent a signal)."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2 or np.all(v == v[0]):
        return np.zeros_like(v)
    return ADVANTAGES.get(estimator)(v)


# Per-turn estimators ------------------------------------------------------------------------

def register_credit(name: str, *, per_turn: bool):
    """Register a per-turn estimator. `per_turn`: the trainer's tokens carry their own turn's
    advantage (`turns[].advantage`); otherwise every token carries the row's `advantage`."""
    def add(fn: CreditFn) -> CreditFn:
        fn.per_turn = per_turn
        return CREDITS.register(name)(fn)
    return add


@register_credit("outcome", per_turn=False)
def outcome_credit(outcomes: np.ndarray, scores: list, estimator: str, discount: float) -> list:
    """Every turn of an episode at the episode's group advantage (the turns' scores unused)."""
    advantages = group_advantages(outcomes, estimator)
    return [None if s is None else np.full(len(s), a) for s, a in zip(scores, advantages)]


@register_credit("turn", per_turn=True)
def turn_credit(outcomes: np.ndarray, scores: list, estimator: str, discount: float) -> list:
    """Each turn's discounted return, normalized by `estimator` over all turns of the group's
    episodes pooled (attempts that are no episode take no part: their tokens carry the row's)."""
    returns = [None if s is None else turn_returns(o, s, discount) for o, s in zip(outcomes, scores)]
    episodes = [g for g in returns if g is not None]
    if not episodes:
        return returns
    pooled = iter(np.split(group_advantages(np.concatenate(episodes), estimator),
                           np.cumsum([len(g) for g in episodes])[:-1]))
    return [None if g is None else next(pooled) for g in returns]


def turn_returns(outcome: float, scores: Sequence[float | None], discount: float) -> np.ndarray:
    """The return of each turn of one episode: K turn scores -> (K,) returns,

        G_k = discount ** (K - 1 - k) * outcome - (score of the state before turn k).

    The outcome is the verified score of the episode's answer, reached after the last turn; a
    turn's score is the domain's score of the state after it (`Step.reward`), capped at the
    outcome (visible tests passed by code that fails the hidden ones earn nothing a turn at a
    time either); a turn without one leaves the state's score as it was; the start scores 0.
    This is potential-based shaping (Ng, Harada and Russell 1999) with the score as potential: the
    score before a turn is a baseline of the state the turn acts in, so the policy gradient stays
    that of the discounted outcome, while a turn is credited only with what was still to earn when
    it began. Per-turn rewards (score after less score before) sum to the outcome; re-running the
    same tests earns nothing, and with discount < 1 the delay costs.
    """
    outcome, before = float(outcome), [0.0]
    for score in scores[:-1]:
        before.append(before[-1] if score is None else min(float(score), outcome))
    last = len(scores) - 1
    return np.array([discount ** (last - k) * outcome - before[k] for k in range(len(scores))])


def assign_credit(outcomes: np.ndarray, scores: list, estimator: str, credit: str,
                  discount: float) -> tuple[np.ndarray, list]:
    """One group's credit: (each attempt's advantage (G,), each attempt's per-turn advantages
    (K_i,) or None). `scores[i]`: attempt i's turn scores if it is an episode, else None."""
    outcomes = np.asarray(outcomes, dtype=np.float64)
    return group_advantages(outcomes, estimator), CREDITS.get(credit)(outcomes, scores,
                                                                       estimator, discount)


# What the trainer's tokens carry -------------------------------------------------------------

def carried_advantages(row: Mapping, credit: str) -> list[float]:
    """The advantages a trajectories row's trained tokens carry under `credit`: its turns' (those
    that have one) under per-turn credit, else the row's. A null reads as NaN (refused later)."""
    def value(x):
        return math.nan if x is None else float(x)
    if CREDITS.get(credit).per_turn:
        turns = [value(t["advantage"]) for t in row.get("turns") or () if t.get("advantage") is not None]
        if turns:
            return turns
    return [value(row.get("advantage"))]


def has_signal(row: Mapping, credit: str) -> bool:
    """Whether a row can move the policy: not filtered, and some advantage its tokens carry is
    not 0. NaN counts as signal, so that the trainer refuses it rather than drop it unseen."""
    return not row.get("filtered") and any(a != 0 for a in carried_advantages(row, credit))


def signal_columns(credit: str) -> list[str]:
    """The trajectories columns `has_signal` reads under `credit`."""
    return ["filtered", "advantage"] + (["turns"] if CREDITS.get(credit).per_turn else [])


def token_advantages(rows: Sequence[Mapping], credit: str, length: int) -> torch.Tensor:
    """(B, length-1) float32: the advantage of each target position of make_batch's batch (position
    p-1+t predicts response token t of a row whose prompt has p tokens). Every position carries the
    row's advantage; under per-turn credit each episode action's positions ([action_start,
    action_end) of `turns`) carry that turn's instead. Positions the response mask leaves out are
    never trained, whatever they hold."""
    out = torch.tensor([float(r["advantage"]) for r in rows])[:, None].repeat(1, length - 1)
    if not CREDITS.get(credit).per_turn:
        return out
    for i, r in enumerate(rows):
        p = len(r["prompt_token_ids"])
        for turn in r.get("turns") or ():
            if turn.get("advantage") is not None and turn.get("action_start") is not None:
                out[i, p - 1 + turn["action_start"]: p - 1 + turn["action_end"]] = turn["advantage"]
    return out
