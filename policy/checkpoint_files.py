"""Whole files at a URI (local path or any pyarrow.fs URI, gs://...): bytes and torch objects.

The checkpoint writes config.json and optimizer.pt with these; a policy backend writes its own
files (weights, tokenizer) with them, so every file of a checkpoint goes through one code path.
"""
import hashlib
import io
import os
import posixpath

import pyarrow.fs as pafs
import torch

from flywheel.schemas.uris import resolve_uri


def join(uri: str, name: str) -> str:
    """`name` inside the folder `uri` (a trailing slash on `uri` is allowed)."""
    return f"{uri.rstrip('/')}/{name}"


def state_digest(state: dict) -> str:
    """"sha256:<hex>" over a state dict: each entry's name, dtype, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name, tensor in sorted(state.items()):
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{name}\0{t.dtype}\0{tuple(tensor.shape)}\0".encode())
        h.update(t.view(torch.uint8).numpy())
    return "sha256:" + h.hexdigest()


def relative_uri(target: str, start: str) -> str | None:
    """`target` as a path relative to the folder `start` ("../initial/hf"), or None when the two
    are not on one filesystem (scheme and bucket)."""
    (t_root, t_path), (s_root, s_path) = _split(target), _split(start)
    if t_root != s_root:
        return None
    return posixpath.relpath(t_path, s_path)


def resolve(uri: str, relative: str) -> str:
    """The URI `relative` (e.g. "../initial/hf", or a plain name) names from the folder `uri`."""
    root, path = _split(join(uri, relative))
    return root + posixpath.normpath(path)


def _split(uri: str) -> tuple[str, str]:
    """("gs://bucket", "/a/b") of "gs://bucket/a/b"; ("", "/a/b") of a local path."""
    if "://" in uri:
        scheme, rest = uri.split("://", 1)
        bucket, _, path = rest.partition("/")
        return f"{scheme}://{bucket}", "/" + path
    return "", os.path.abspath(uri)


def write_file(uri: str, data: bytes) -> None:
    fs, path = resolve_uri(uri)
    with fs.open_output_stream(path) as f:
        f.write(data)


def read_file(uri: str) -> bytes:
    fs, path = resolve_uri(uri)
    with fs.open_input_file(path) as f:
        return f.read()


def file_exists(uri: str) -> bool:
    fs, path = resolve_uri(uri)
    return fs.get_file_info(path).type == pafs.FileType.File


def delete_file(uri: str) -> None:
    fs, path = resolve_uri(uri)
    fs.delete_file(path)


def make_dirs(uri: str) -> None:
    """Create the folder `uri` on a local disk; nothing on an object store, which has no folders
    (a marker object "a/b/" beside "a/b/c" is clutter there, and breaks the GCS emulator)."""
    fs, path = resolve_uri(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path, recursive=True)


def save_torch(uri: str, obj) -> None:
    """torch.save of `obj` (a state_dict) to `uri`."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    write_file(uri, buf.getvalue())


def load_torch(uri: str, device: str | torch.device = "cpu"):
    """A state_dict saved by `save_torch`, its tensors on `device` (weights only: no pickled code)."""
    return torch.load(io.BytesIO(read_file(uri)), map_location=device, weights_only=True)
