"""Repository snapshots: the text files of a folder, an archive or a git commit, content-addressed.

A repository task names its codebase once; the files then live in a store under their digest
(`SnapshotStore`: one gzipped JSON object per snapshot, local or gs://), and the task row carries
only the digest, so a thousand SWE-bench rows do not each carry a repository through the pipeline.

What is read is untrusted: symlinks are skipped, never followed; archive members with an absolute
path or `..` are refused; links and devices are ignored; and each file (1 MB) and the whole
snapshot (200 MB, 50,000 files) are bounded. Archives are read member by member, never extracted
to disk. A source `PATH@COMMIT` (`@` in its last path component) is the git repository at PATH
at that commit, read through `git archive` (local only; no fetch).

    snap = read_snapshot("repos/django__django-11099.tar.gz")
    digest = SnapshotStore(default_store()).put(snap.files)
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import re
import stat
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 200 << 20
MAX_FILES = 50_000
ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9A-Za-z_][0-9A-Za-z._/~^-]*")


class SnapshotError(ValueError):
    """A snapshot that cannot be read or stored (naming the source, member, limit or URI)."""


@dataclass(frozen=True)
class Snapshot:
    files: dict[str, str]                                   # relative POSIX path -> UTF-8 text
    skipped: dict[str, str] = field(default_factory=dict)   # path -> why it is not in `files`
    digest: str = ""


def snapshot_digest(files: dict[str, str]) -> str:
    """sha256 over the sorted (path, sha256(text)) pairs: the same files give the same digest."""
    outer = hashlib.sha256()
    for path in sorted(files):
        inner = hashlib.sha256(files[path].encode("utf-8", "surrogatepass")).hexdigest()
        outer.update(f"{path}\0{inner}\n".encode("utf-8", "surrogatepass"))
    return "sha256:" + outer.hexdigest()


def split_commit(source: str) -> tuple[str, str | None]:
    """(path, commit) of `PATH@COMMIT`; (source, None) when its last component has no `@`."""
    head, _, last = source.rstrip("/").rpartition("/")
    if "@" not in last:
        return source, None
    name, _, commit = last.rpartition("@")
    return (f"{head}/{name}" if head else name), commit


def read_snapshot(source: str) -> Snapshot:
    """The text files of a local folder, an archive (.tar.gz, .tgz, .tar, .zip) or `REPO@COMMIT`."""
    path, commit = split_commit(source)
    try:
        if commit is not None:
            entries = _git_entries(path, commit)
        elif not os.path.lexists(path):
            raise SnapshotError(f"{source}: no such folder or archive")
        elif os.path.isdir(path):
            entries = _folder_entries(path)
        elif path.endswith(".zip"):
            entries = _strip_top(_zip_entries(path))
        elif path.endswith((".tar.gz", ".tgz", ".tar")):
            entries = _strip_top(_tar_entries(tarfile.open(path, "r:*"), path))
        else:
            raise SnapshotError(f"{source}: not a folder or an archive ({', '.join(ARCHIVES)})")
        files, skipped = _decode(entries, source)
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as e:
        raise SnapshotError(f"{source}: cannot read the snapshot: {e}") from None
    return Snapshot(files, skipped, snapshot_digest(files))


# -- entries: (path, bytes, None) or (path, None, why skipped) ----------------------------------
Entry = tuple[str, "bytes | None", "str | None"]


def _folder_entries(root: str) -> Iterator[Entry]:
    for here, dirs, names in os.walk(root, followlinks=False):
        rel = os.path.relpath(here, root)
        prefix = "" if rel == "." else PurePosixPath(*rel.split(os.sep)).as_posix() + "/"
        for d in sorted(dirs):
            if d == ".git" or os.path.islink(os.path.join(here, d)):
                dirs.remove(d)
                if d != ".git":
                    yield prefix + d, None, "a symlink"
        for name in sorted(names):
            yield prefix + name, *_local_file(os.path.join(here, name))


def _local_file(path: str) -> tuple[bytes | None, str | None]:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        return None, "a symlink"
    if not stat.S_ISREG(info.st_mode):
        return None, "a special file"
    if info.st_size > MAX_FILE_BYTES:
        return None, f"over the per-file limit ({MAX_FILE_BYTES} bytes)"
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(MAX_FILE_BYTES + 1), None


def _member_path(name: str, source: str) -> str:
    """The member's relative POSIX path; SnapshotError for an absolute path or a `..`."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or ".." in parts:
        raise SnapshotError(f"{source}: archive member {name!r} leads outside the archive "
                            f"(absolute path or `..`); such archives are refused")
    return "/".join(p for p in parts if p not in ("", "."))


def _tar_entries(tar: tarfile.TarFile, source: str) -> Iterator[Entry]:
    with tar:
        for member in tar:  # in order, so a streamed archive (git archive) reads too
            path = _member_path(member.name, source)
            if member.isdir() or not path or path == "pax_global_header":
                continue
            if member.issym() or member.islnk():
                yield path, None, "a link"
            elif not member.isfile():
                yield path, None, "a special file"
            elif member.size > MAX_FILE_BYTES:
                yield path, None, f"over the per-file limit ({MAX_FILE_BYTES} bytes)"
            else:
                yield path, tar.extractfile(member).read(MAX_FILE_BYTES + 1), None


def _zip_entries(source: str) -> Iterator[Entry]:
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            path = _member_path(info.filename, source)
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix mode recorded
            if info.is_dir() or not path:
                continue
            if kind == stat.S_IFLNK:
                yield path, None, "a link"
            elif kind and kind != stat.S_IFREG:
                yield path, None, "a special file"
            elif info.file_size > MAX_FILE_BYTES:
                yield path, None, f"over the per-file limit ({MAX_FILE_BYTES} bytes)"
            else:
                with archive.open(info) as f:  # the declared size may lie: read at most one more byte
                    yield path, f.read(MAX_FILE_BYTES + 1), None


def _git_entries(repo: str, commit: str) -> Iterator[Entry]:
    if not _COMMIT.fullmatch(commit):
        raise SnapshotError(f"{repo}@{commit}: {commit!r} is not a commit name")
    if not os.path.isdir(repo):
        raise SnapshotError(f"{repo}@{commit}: no such git repository")
    # The repository is untrusted: no system or user config, no hooks or helpers it could name.
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": ""}
    proc = subprocess.Popen(["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                             "-C", repo, "archive", "--format=tar", commit, "--"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    broken = None
    try:
        yield from _tar_entries(tarfile.open(fileobj=proc.stdout, mode="r|"), f"{repo}@{commit}")
    except tarfile.TarError as e:  # git says why on stderr when it failed
        broken = e
    finally:
        proc.stdout.close()
        error = proc.stderr.read().decode("utf-8", "replace").strip()
        status = proc.wait()
    if status != 0:
        raise SnapshotError(f"{repo}@{commit}: git archive failed: {error[:500]}")
    if broken is not None:
        raise broken


def _strip_top(entries: Iterator[Entry]) -> list[Entry]:
    """The entries without one folder that holds them all (GitHub's archives: `repo-sha/`)."""
    entries = list(entries)
    tops = {path.split("/", 1)[0] for path, _, _ in entries}
    if len(tops) == 1 and all("/" in path for path, _, _ in entries):
        return [(path.split("/", 1)[1], data, why) for path, data, why in entries]
    return entries


def _decode(entries, source: str) -> tuple[dict[str, str], dict[str, str]]:
    files, skipped, total = {}, {}, 0
    for count, (path, data, why) in enumerate(entries, start=1):
        if count > MAX_FILES:
            raise SnapshotError(f"{source}: more than {MAX_FILES} files (the file-count limit)")
        if data is not None:
            total += len(data)
            if total > MAX_TOTAL_BYTES:
                raise SnapshotError(f"{source}: more than {MAX_TOTAL_BYTES} bytes of files "
                                    f"(the total-size limit)")
            why = _text_problem(data)
        if why is None:
            files[path] = data.decode("utf-8")
        else:
            skipped[path] = why
    return files, skipped


def _text_problem(data: bytes) -> str | None:
    if len(data) > MAX_FILE_BYTES:
        return f"over the per-file limit ({MAX_FILE_BYTES} bytes)"
    if b"\0" in data:
        return "binary"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    return None


# -- the store -----------------------------------------------------------------------------------
def default_store() -> str:
    """$FLYWHEEL_SNAPSHOT_STORE, else ~/.cache/flywheel/snapshots (set a gs:// store for workers
    that do not share the launcher's disk)."""
    return os.path.expanduser(os.environ.get("FLYWHEEL_SNAPSHOT_STORE")
                              or "~/.cache/flywheel/snapshots")


class SnapshotStore:
    """Snapshots by digest under `root` (a folder or gs://...): ROOT/<hex>.json.gz, written once."""

    def __init__(self, root: str):
        self.root = root

    def uri(self, digest: str) -> str:
        from apache_beam.io.filesystems import FileSystems
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise SnapshotError(f"{digest!r} is not a snapshot digest (sha256:<64 hex digits>)")
        return FileSystems.join(self.root, digest.removeprefix("sha256:") + ".json.gz")

    def put(self, files: dict[str, str]) -> str:
        """The digest of `files`, stored unless an object of that digest is there already."""
        from apache_beam.io.filesystems import CompressionTypes, FileSystems
        digest = snapshot_digest(files)
        uri = self.uri(digest)
        if FileSystems.exists(uri):
            return digest
        data = gzip.compress(json.dumps(files, sort_keys=True).encode("utf-8", "surrogatepass"),
                             mtime=0)
        if "://" in uri:  # object stores create an object whole or not at all
            with FileSystems.create(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
                f.write(data)
            return digest
        os.makedirs(os.path.dirname(os.path.abspath(uri)), exist_ok=True)
        tmp = f"{uri}.tmp-{os.getpid()}"  # a write cut short must not look like a snapshot
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, uri)
        return digest

    def get(self, digest: str) -> dict[str, str]:
        """The files of `digest` (a copy), verified against it; read once per process."""
        return dict(_load(self.root, digest))


@functools.lru_cache(maxsize=4)
def _load(root: str, digest: str) -> dict[str, str]:
    from apache_beam.io.filesystems import CompressionTypes, FileSystems
    uri = SnapshotStore(root).uri(digest)
    try:
        with FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            data = f.read()
    except Exception as e:  # Beam wraps a missing object in several error types
        raise SnapshotError(f"snapshot {uri} cannot be read: {type(e).__name__}: {e}"[:800]) from None
    try:
        files = json.loads(gzip.decompress(data))
    except (OSError, EOFError, ValueError) as e:
        raise SnapshotError(f"snapshot {uri} is not gzipped JSON: {e}") from None
    if (not isinstance(files, dict) or not all(isinstance(t, str) for t in files.values())
            or snapshot_digest(files) != digest):
        raise SnapshotError(f"snapshot {uri} does not match its digest {digest}; "
                            f"the object is corrupt or was changed")
    return files
