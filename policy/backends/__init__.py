"""Policy backends by name: one module (or package) per backend in this folder.

    policy = create_policy("tiny", {"d_model": 64}, seed=0)

A run config names the backend and its options; a checkpoint's config.json names the backend
that wrote it, and `flywheel.policy.checkpoint.load_checkpoint` loads it through this registry.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from flywheel.registry import Registry
from flywheel.policy.policy import Policy

POLICIES: Registry[type[Policy]] = Registry("policy backend", home="flywheel.policy.backends")


def create_policy(backend: str, options: Mapping[str, object], seed: int,
                  device: str | torch.device = "cpu") -> Policy:
    """A fresh policy of the named backend; an unknown name raises KeyError listing the known."""
    return POLICIES.get(backend).create(options, seed, device)


def backend_name(policy: Policy) -> str:
    """The registry name of `policy`'s backend (what a checkpoint's config.json records)."""
    for name, backend in POLICIES.items():
        if type(policy) is backend:
            return name
    raise KeyError(f"{type(policy).__qualname__} is not a registered policy backend; "
                   f"known: {', '.join(POLICIES.names())}")
