"""Policy checkpoints as a folder of three files, on a local path or any pyarrow.fs URI (gs://...).

    config.json     PolicyConfig, tokenizer spec, meta (policy_version, train_stats, ...)
    model.pt        model state_dict
    optimizer.pt    optimizer state_dict (absent when saved without an optimizer)

config.json is written last, so a folder without it is an incomplete checkpoint.
"""
import io
import json
from dataclasses import dataclass

import pyarrow.fs as pafs
import torch

from flywheel.trainer.model import PolicyConfig, TinyPolicy
from flywheel.trainer.tokens import TOKENIZER_SPEC
from flywheel.schemas.uris import resolve_uri


@dataclass
class Checkpoint:
    model: TinyPolicy
    optimizer_state: dict | None
    meta: dict
    config: PolicyConfig


def _write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    with fs.open_output_stream(path) as f:
        f.write(data)


def _read(fs: pafs.FileSystem, path: str) -> bytes:
    with fs.open_input_file(path) as f:
        return f.read()


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    return fs.get_file_info(path).type == pafs.FileType.File


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def save_checkpoint(uri: str, model: TinyPolicy, optimizer: torch.optim.Optimizer | None, meta: dict) -> None:
    """Write model (+ optimizer) state and config.json (last) under `uri`."""
    fs, root = resolve_uri(uri)
    fs.create_dir(root, recursive=True)
    _write(fs, f"{root}/model.pt", _torch_bytes(model.state_dict()))
    if optimizer is not None:
        _write(fs, f"{root}/optimizer.pt", _torch_bytes(optimizer.state_dict()))
    elif _exists(fs, f"{root}/optimizer.pt"):
        fs.delete_file(f"{root}/optimizer.pt")  # never pair new weights with a stale optimizer
    config = {"policy": model.cfg.to_dict(), "tokenizer": TOKENIZER_SPEC, "meta": meta}
    _write(fs, f"{root}/config.json", json.dumps(config, indent=2, sort_keys=True).encode())


def load_checkpoint(uri: str, device: str | torch.device = "cpu") -> Checkpoint:
    """Rebuild the policy on `device`; optimizer_state is None when none was saved."""
    fs, root = resolve_uri(uri)
    if not _exists(fs, f"{root}/config.json"):
        raise FileNotFoundError(f"no checkpoint at {uri} (config.json missing)")
    config = json.loads(_read(fs, f"{root}/config.json"))
    if config["tokenizer"] != TOKENIZER_SPEC:
        raise ValueError(f"checkpoint tokenizer {config['tokenizer']} != this code's {TOKENIZER_SPEC}")
    cfg = PolicyConfig.from_dict(config["policy"])
    model = TinyPolicy(cfg)
    state = torch.load(io.BytesIO(_read(fs, f"{root}/model.pt")), map_location=device, weights_only=True)
    model.load_state_dict(state)
    model.to(device)
    opt_state = None
    if _exists(fs, f"{root}/optimizer.pt"):
        opt_bytes = io.BytesIO(_read(fs, f"{root}/optimizer.pt"))
        opt_state = torch.load(opt_bytes, map_location=device, weights_only=True)
    return Checkpoint(model=model, optimizer_state=opt_state, meta=config["meta"], config=cfg)


def checkpoint_exists(uri: str) -> bool:
    """True when `uri` holds a complete checkpoint (its config.json is written)."""
    fs, root = resolve_uri(uri)
    return _exists(fs, f"{root}/config.json")
