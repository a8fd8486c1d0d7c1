"""Policy checkpoints as a folder, on a local path or any pyarrow.fs URI (gs://...).

    config.json     backend name, what the backend needs to load its files, meta
                    (policy_version, train_stats, ...)
    optimizer.pt    optimizer state_dict (absent when saved without an optimizer)
    ...             the backend's own files (tiny: model.pt)

config.json is written last, so a folder without it is an incomplete checkpoint. Loading
dispatches on the backend it names, through the policy registry.
"""
import json
from dataclasses import dataclass

import torch

from flywheel.trainer.checkpoint_files import (
    delete_file,
    file_exists,
    join,
    load_torch,
    make_dirs,
    read_file,
    save_torch,
    write_file,
)
from flywheel.trainer.policies import POLICIES, backend_name
from flywheel.trainer.policy import Policy


@dataclass
class Checkpoint:
    policy: Policy
    optimizer_state: dict | None
    meta: dict


def save_checkpoint(uri: str, policy: Policy, optimizer: torch.optim.Optimizer | None,
                    meta: dict) -> None:
    """Write the policy's files (+ optimizer state) and config.json (last) under `uri`."""
    make_dirs(uri)
    saved = policy.save(uri)
    if optimizer is not None:
        save_torch(join(uri, "optimizer.pt"), optimizer.state_dict())
    elif file_exists(join(uri, "optimizer.pt")):
        delete_file(join(uri, "optimizer.pt"))  # never pair new weights with a stale optimizer
    config = {"backend": backend_name(policy), "policy": saved, "meta": meta}
    write_file(join(uri, "config.json"), json.dumps(config, indent=2, sort_keys=True).encode())


def load_checkpoint(uri: str, device: str | torch.device = "cpu") -> Checkpoint:
    """Rebuild the policy on `device`; optimizer_state is None when none was saved."""
    if not checkpoint_exists(uri):
        raise FileNotFoundError(f"no checkpoint at {uri} (config.json missing)")
    config = json.loads(read_file(join(uri, "config.json")))
    policy = POLICIES.get(config["backend"]).load(uri, config["policy"], device)
    opt_state = None
    if file_exists(join(uri, "optimizer.pt")):
        opt_state = load_torch(join(uri, "optimizer.pt"), device)
    return Checkpoint(policy=policy, optimizer_state=opt_state, meta=config["meta"])


def checkpoint_exists(uri: str) -> bool:
    """True when `uri` holds a complete checkpoint (its config.json is written)."""
    return file_exists(join(uri, "config.json"))
