"""Group-relative advantage estimators, by name.

Each estimator maps the rewards of one group (the G attempts at one task) to their advantages:
`fn(rewards: np.ndarray (G,)) -> np.ndarray (G,)`. A config names the estimator; the rollout
pipeline looks it up in ADVANTAGES, so adding one is one decorated function.
"""
from typing import Callable

import numpy as np

from flywheel.registry import Registry

AdvantageFn = Callable[[np.ndarray], np.ndarray]
ADVANTAGES: Registry[AdvantageFn] = Registry("advantage estimator", home=__name__)


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
