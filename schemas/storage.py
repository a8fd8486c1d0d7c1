"""Storage: local paths and pyarrow.fs URIs (gs://, file://, ...) behind one call, and whole
files at a URI. The one module for it: the tables (schemas/read.py, write.py), checkpoints
(policy/checkpoint.py), model folders, exports and the run's files all go through it.

It lives in schemas/ because every folder that stores anything may import schemas/ and it needs
nothing but pyarrow (the folder's rule); torch objects (a checkpoint's state dicts) are written as
bytes through it by policy/checkpoint.py. Beam's own GCS credentials for the emulator are Beam
code and stay in transforms/gcs_credentials.py.

gs:// goes to pyarrow's GcsFileSystem with a bounded retry time (its default retries a failing
call for 15 minutes, which is how an unreachable endpoint looks like a hang), and to the GCS
emulator at $STORAGE_EMULATOR_HOST when that is set, anonymously, as Google's own client
libraries (and so Beam's gcsio) do: without it, pyarrow would talk to the real service while
Beam wrote to the emulator.
"""
import contextlib
import os
import posixpath
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import BinaryIO
from urllib.parse import urlsplit

import pyarrow.fs as pafs

GCS_RETRY_LIMIT = timedelta(seconds=60)


def resolve_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path without a trailing slash); a plain path may be relative."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    if uri.startswith("gs://") and "?" not in uri and "@" not in uri.split("/")[2]:
        return gcs_filesystem(), uri[len("gs://"):].rstrip("/")  # else the URI says how itself
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path.rstrip("/")


def gcs_filesystem() -> pafs.GcsFileSystem:
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator:
        parts = urlsplit(emulator if "://" in emulator else f"http://{emulator}")
        return pafs.GcsFileSystem(anonymous=True, endpoint_override=parts.netloc,
                                  scheme=parts.scheme, retry_time_limit=GCS_RETRY_LIMIT)
    return pafs.GcsFileSystem(retry_time_limit=GCS_RETRY_LIMIT)


def join(uri: str, *names: str) -> str:
    """`names` inside the folder `uri`, one after another (a trailing slash on `uri` is allowed)."""
    for name in names:
        uri = f"{uri.rstrip('/')}/{name}"
    return uri


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


def write_whole(uri: str, data: bytes | Callable[[BinaryIO], object], durable: bool = False) -> None:
    """Write `data` at `uri` whole or not at all: on a local disk to a hidden temporary name in
    the same folder, renamed into place (`durable`: synced to the disk first, so that a power cut
    leaves the old file or the new one); an object store creates an object whole or not at all.
    `data` is the bytes, or a function that writes them to the open file (Parquet streams in)."""
    write = data if callable(data) else (lambda f: f.write(data))
    fs, path = resolve_uri(uri)
    if not isinstance(fs, pafs.LocalFileSystem):  # no folders made: a marker object is clutter
        with fs.open_output_stream(path) as f:
            write(f)
        return
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{name}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def exists(uri: str) -> bool:
    """Whether a file or a folder (on an object store: any object below the prefix) is at `uri`."""
    fs, path = resolve_uri(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def delete(uri: str) -> None:
    """Remove the file or the folder (with everything below it) at `uri`, if there is one."""
    fs, path = resolve_uri(uri)
    kind = fs.get_file_info(path).type
    if kind == pafs.FileType.Directory and isinstance(fs, pafs.LocalFileSystem):
        fs.delete_dir(path)
    elif kind == pafs.FileType.Directory:  # a prefix: its objects (there is no marker to delete)
        fs.delete_dir_contents(path, missing_dir_ok=True)
    elif kind == pafs.FileType.File:
        fs.delete_file(path)


def list_files(uri: str, recursive: bool = False) -> list[str]:
    """The URIs of the files in the folder `uri` (below it too, `recursive`), sorted; [] when
    there is no such folder."""
    fs, path = resolve_uri(uri)
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=recursive))
    scheme = uri.split("://", 1)[0] + "://" if "://" in uri else ""
    return sorted(scheme + info.path for info in infos if info.type == pafs.FileType.File)
