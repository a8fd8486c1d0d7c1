"""Policy checkpoints as a folder, on a local path or any pyarrow.fs URI (gs://...).

    config.json     backend name, what the backend needs to load its files, the weights'
                    digest, meta (policy_version, train_stats, ...)
    optimizer.pt    optimizer state_dict (absent when saved without an optimizer)
    ...             the backend's own files (tiny: model.pt)

config.json is written last, so a folder without it is an incomplete checkpoint. Loading
dispatches on the backend it names, through the policy registry.

The digest (`policy_digest`) names the weights, not the files: every trajectory row records the
digest of the policy that sampled it and the trainer refuses rows of any other, so a rollout that
silently sampled a stale policy is caught. Loading recomputes it from the weights actually loaded
and refuses a checkpoint whose files no longer match what was saved.
"""
import hashlib
import io
import json
from dataclasses import dataclass

import torch

from flywheel.schemas.storage import (delete_file, file_exists, join, make_dirs, read_file,
                                      write_file)
from flywheel.policy.backends import POLICIES, backend_name
from flywheel.policy.policy import Policy


@dataclass
class Checkpoint:
    policy: Policy
    optimizer_state: dict | None
    meta: dict
    digest: str  # policy_digest of the weights loaded


class CheckpointDigestError(ValueError):
    """A checkpoint's weights are not the ones its config.json recorded when it was saved."""


def policy_digest(policy: Policy) -> str:
    """"sha256:<hex>" over the policy's state_dict: each entry's name, dtype, shape and bytes,
    in name order.

    Weights rather than files, so the digest is the same for a policy created fresh, saved, or
    loaded on any device, and a worker can state what it actually holds in memory. Hashing a
    135M-parameter float32 model takes about 0.4 s on one CPU core.
    """
    return state_digest(policy.module.state_dict())


def save_checkpoint(uri: str, policy: Policy, optimizer: torch.optim.Optimizer | None,
                    meta: dict) -> str:
    """Write the policy's files (+ optimizer state) and config.json (last) under `uri`; returns
    the weights' digest, which config.json records."""
    digest = policy_digest(policy)
    make_dirs(uri)
    saved = policy.save(uri)
    if optimizer is not None:
        save_torch(join(uri, "optimizer.pt"), optimizer.state_dict())
    elif file_exists(join(uri, "optimizer.pt")):
        delete_file(join(uri, "optimizer.pt"))  # never pair new weights with a stale optimizer
    config = {"backend": backend_name(policy), "policy": saved, "digest": digest, "meta": meta}
    write_file(join(uri, "config.json"), json.dumps(config, indent=2, sort_keys=True).encode())
    return digest


def load_checkpoint(uri: str, device: str | torch.device = "cpu") -> Checkpoint:
    """Rebuild the policy on `device`; optimizer_state is None when none was saved.

    Raises CheckpointDigestError when the loaded weights' digest differs from the recorded one
    (files overwritten or half copied after the save); a checkpoint saved before digests were
    recorded gets the digest of what was loaded.
    """
    if not checkpoint_exists(uri):
        raise FileNotFoundError(f"no checkpoint at {uri} (config.json missing)")
    config = json.loads(read_file(join(uri, "config.json")))
    policy = POLICIES.get(config["backend"]).load(uri, config["policy"], device)
    opt_state = None
    if file_exists(join(uri, "optimizer.pt")):
        opt_state = load_torch(join(uri, "optimizer.pt"), device)
    digest = policy_digest(policy)
    recorded = config.get("digest")
    if recorded is not None and recorded != digest:
        raise CheckpointDigestError(
            f"checkpoint {uri}: the loaded weights have digest {digest}, but its config.json "
            f"records {recorded}: its files changed after it was saved (an overwrite or a partial "
            "copy?); refusing to use it")
    return Checkpoint(policy=policy, optimizer_state=opt_state, meta=config["meta"], digest=digest)


def recorded_digest(uri: str) -> str | None:
    """The weights' digest a checkpoint's config.json records, read without loading them (None
    for a checkpoint saved before digests were recorded)."""
    return json.loads(read_file(join(uri, "config.json"))).get("digest")


def checkpoint_exists(uri: str) -> bool:
    """True when `uri` holds a complete checkpoint (its config.json is written)."""
    return file_exists(join(uri, "config.json"))


def state_digest(state: dict) -> str:
    """"sha256:<hex>" over a state dict: each entry's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{name}\0{t.dtype}\0{tuple(tensor.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy())
    return "sha256:" + h.hexdigest()


def save_torch(uri: str, obj) -> None:
    """torch.save of `obj` (a state_dict) to `uri`."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    write_file(uri, buf.getvalue())


def load_torch(uri: str, device: str | torch.device = "cpu"):
    """A state_dict saved by `save_torch`, its tensors on `device` (weights only: no pickled code)."""
    return torch.load(io.BytesIO(read_file(uri)), map_location=device, weights_only=True)
