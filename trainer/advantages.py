"""Group-relative advantage estimators, by name.

Each estimator maps the rewards of one group (the G attempts at one task) to their advantages:
`fn(rewards: np.ndarray (G,)) -> np.ndarray (G,)`. A config names the estimator; the rollout
pipeline looks it up here, so adding one is one decorated function.
"""
from typing import Callable

import numpy as np

AdvantageFn = Callable[[np.ndarray], np.ndarray]
_ADVANTAGES: dict[str, AdvantageFn] = {}


def register_advantage(name: str):
    """Decorator adding `fn` to the registry under `name`; a name is taken only once."""

    def wrap(fn: AdvantageFn) -> AdvantageFn:
        if name in _ADVANTAGES:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        _ADVANTAGES[name] = fn
        return fn

    return wrap


def get_advantage(name: str) -> AdvantageFn:
    try:
        return _ADVANTAGES[name]
    except KeyError:
        raise KeyError(f"unknown advantage estimator {name!r}; known: {sorted(_ADVANTAGES)}") from None


def advantage_names() -> list[str]:
    return sorted(_ADVANTAGES)


@register_advantage("grpo")
def grpo(rewards: np.ndarray) -> np.ndarray:
    """(r - mean) / (std + 1e-6), population std; (G,) -> (G,), all zero when rewards are equal."""
    r = np.asarray(rewards, dtype=np.float64)
    std = r.std()
    if std == 0:
        return np.zeros_like(r)
    return (r - r.mean()) / (std + 1e-6)


@register_advantage("dr_grpo")
def dr_grpo(rewards: np.ndarray) -> np.ndarray:
    """r - mean, without the std division that up-weights near-uniform groups (Dr. GRPO); (G,) -> (G,)."""
    r = np.asarray(rewards, dtype=np.float64)
    return r - r.mean()


@register_advantage("rloo")
def rloo(rewards: np.ndarray) -> np.ndarray:
    """r_i - mean of the other G-1 rewards (REINFORCE leave-one-out); (G,) -> (G,), zero if G == 1."""
    r = np.asarray(rewards, dtype=np.float64)
    g = len(r)
    if g < 2:
        return np.zeros_like(r)
    return r - (r.sum() - r) / (g - 1)
