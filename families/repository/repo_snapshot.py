"""Repository snapshots: the text files of a folder, an archive or a git commit, content-addressed.

A repository task names its codebase once; the files then live in a store under their digest
(`SnapshotStore`: one gzipped JSON object per snapshot, local or gs://), and the task row carries
only the digest, so a thousand SWE-bench rows do not each carry a repository through the pipeline.

What is read is untrusted: symlinks are skipped, never followed; archive members with an absolute
path or `..` are refused; links, devices and files whose names are not plain relative paths
(snapshot_paths.py) are skipped; each file (4 MB), the whole snapshot (200 MB, 50,000 files,
100,000 entries of any kind) and an archive's decompressed stream (512 MB, whatever its members
declare) are bounded, so a bomb costs bounded CPU, memory and no disk. Archives are read member
by member, never extracted to disk. A source `PATH@COMMIT` (`@` in its last path component) is
the git repository at PATH at that commit, read with plumbing under a config of our own
(snapshot_git.py: no filter, attribute, hook or config of the repository runs; local only).

A stored snapshot is re-verified on every read from its store: the object's files must hash to
the digest it is stored under and their names must be plain relative paths (a store, or a cache
folder others can write, is not trusted to hold what its names say).

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
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from flywheel.families.repository.snapshot_git import git_entries
from flywheel.families.repository.snapshot_paths import SnapshotError, check_files, name_problem, shown

MAX_FILE_BYTES = 4 << 20       # as the tools handle (harnesses/repo.py MAX_FILE)
MAX_TOTAL_BYTES = 200 << 20
MAX_FILES = 50_000
MAX_ENTRIES = 100_000          # members of any kind (folders, links, skipped files) read at most
MAX_STREAM_BYTES = 512 << 20   # decompressed bytes of one archive read at most
MAX_STORED_BYTES = 2 * MAX_TOTAL_BYTES + (16 << 20)  # one stored object, decompressed (JSON escapes)
ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_DIGEST_DOMAIN = b"flywheel snapshot v2\0"

__all__ = ["SnapshotError", "Snapshot", "snapshot_digest", "read_snapshot", "SnapshotStore",
           "default_store", "same_store", "split_commit"]


@dataclass(frozen=True)
class Snapshot:
    files: dict[str, str]                                   # relative POSIX path -> UTF-8 text
    skipped: dict[str, str] = field(default_factory=dict)   # path -> why it is not in `files`
    digest: str = ""


def snapshot_digest(files: dict[str, str]) -> str:
    """sha256 over an unambiguous encoding of the files: a fixed tag, then for each path in
    sorted order its UTF-8 bytes prefixed by their length (8 bytes, big-endian) and followed by
    the 32 raw bytes of sha256(text). Each name is framed by its length and each digest has a
    fixed size, so the encoding reads back one way only: no choice of names (NUL, newline, a
    name that spells another entry) makes two different file maps share a digest."""
    outer = hashlib.sha256(_DIGEST_DOMAIN)
    for path in sorted(files):
        name = path.encode("utf-8", "surrogatepass")
        outer.update(len(name).to_bytes(8, "big") + name)
        outer.update(hashlib.sha256(files[path].encode("utf-8", "surrogatepass")).digest())
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
            entries = _git_source(path, commit)
        elif not os.path.lexists(path):
            raise SnapshotError(f"{source}: no such folder or archive")
        elif os.path.isdir(path):
            entries = _folder_entries(path)
        elif path.endswith(".zip"):
            entries = _strip_top(_zip_entries(path))
        elif path.endswith((".tar.gz", ".tgz", ".tar")):
            entries = _strip_top(_tar_file_entries(path))
        else:
            raise SnapshotError(f"{source}: not a folder or an archive ({', '.join(ARCHIVES)})")
        files, skipped = _decode(entries, source)
    except (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile, RuntimeError,
            NotImplementedError) as e:  # RuntimeError, NotImplementedError: zip encryption, methods
        raise SnapshotError(f"{source}: cannot read the snapshot: {type(e).__name__}: {e}"[:800]) from None
    return Snapshot(files, skipped, snapshot_digest(files))


# -- entries: (path, bytes, None) or (path, None, why skipped) ----------------------------------
Entry = tuple[str, "bytes | None", "str | None"]


def _folder_entries(root: str) -> Iterator[Entry]:
    for here, dirs, names in os.walk(root, followlinks=False):
        rel = os.path.relpath(here, root)
        prefix = "" if rel == "." else PurePosixPath(*rel.split(os.sep)).as_posix() + "/"
        yield prefix, None, None  # a folder: counted against MAX_ENTRIES, nothing else
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
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped since the lstat
            return None, "a special file"
        return f.read(MAX_FILE_BYTES + 1), None


def _member_path(name: str, source: str) -> str:
    """The member's relative POSIX path; SnapshotError for an absolute path or a `..`."""
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name) or ".." in parts:
        raise SnapshotError(f"{source}: archive member {name!r} leads outside the archive "
                            f"(absolute path or `..`); such archives are refused")
    return "/".join(p for p in parts if p not in ("", "."))


class _Bounded:
    """A readable stream that raises SnapshotError once more than `limit` bytes came through it:
    the decompressed size of an archive, whatever its headers declare."""

    def __init__(self, raw, limit: int, source: str):
        self.raw, self.left, self.source = raw, limit, source

    def read(self, size: int = -1) -> bytes:
        size = self.left + 1 if size is None or size < 0 else min(size, self.left + 1)
        data = self.raw.read(size)
        self.left -= len(data)
        if self.left < 0:
            raise SnapshotError(f"{self.source}: the archive unpacks to more than "
                                f"{MAX_STREAM_BYTES} bytes (the archive-size limit)")
        return data


def _tar_file_entries(path: str) -> Iterator[Entry]:
    """A .tar or gzipped tar, streamed: decompressed here, bounded, read in one pass."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
        yield from _tar_entries(tarfile.open(fileobj=_Bounded(stream, MAX_STREAM_BYTES, path),
                                             mode="r|"), path)


def _tar_entries(tar: tarfile.TarFile, source: str) -> Iterator[Entry]:
    with tar:
        for member in tar:  # in order: the archive is a stream
            path = _member_path(member.name, source)
            if member.isdir() or not path or path == "pax_global_header":
                yield "", None, None  # counted against MAX_ENTRIES, nothing else
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
        members = archive.infolist()
        if len(members) > MAX_ENTRIES:
            raise SnapshotError(f"{source}: more than {MAX_ENTRIES} members (the entry limit)")
        for info in members:
            path = _member_path(info.filename, source)
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix mode recorded
            if info.is_dir() or not path:
                yield "", None, None
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


def _git_source(repo: str, commit: str) -> Iterator[Entry]:
    try:
        yield from git_entries(repo, commit, MAX_ENTRIES, MAX_FILE_BYTES)
    except SnapshotError as e:
        raise SnapshotError(f"{repo}@{commit}: {e}") from None


def _strip_top(entries: Iterator[Entry]) -> list[Entry]:
    """The entries without one folder that holds them all (GitHub's archives: `repo-sha/`)."""
    entries = list(entries)
    named = [path for path, _, _ in entries if path]
    tops = {path.split("/", 1)[0] for path in named}
    if len(tops) == 1 and all("/" in path for path in named):
        return [(path.split("/", 1)[1] if path else "", data, why) for path, data, why in entries]
    return entries


def _decode(entries, source: str) -> tuple[dict[str, str], dict[str, str]]:
    files, skipped, total, count = {}, {}, 0, 0
    for seen, (path, data, why) in enumerate(entries, start=1):
        if seen > MAX_ENTRIES:
            raise SnapshotError(f"{source}: more than {MAX_ENTRIES} entries (the entry limit)")
        if not path or path.endswith("/"):  # a folder
            continue
        count += 1
        if count > MAX_FILES:
            raise SnapshotError(f"{source}: more than {MAX_FILES} files (the file-count limit)")
        unsafe = name_problem(path)
        if unsafe:
            skipped[shown(path)] = unsafe
            continue
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


def same_store(a: str, b: str) -> bool:
    """Whether store roots `a` and `b` name one place (a local folder however spelled; a URI up
    to a trailing slash)."""
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(os.path.expanduser(b))


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
        """The digest of `files`, stored unless an object of that digest is there already; files
        whose names are not plain relative paths (snapshot_paths.py) are refused."""
        from apache_beam.io.filesystems import CompressionTypes, FileSystems
        check_files(files, "snapshot")
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
        folder = os.path.dirname(os.path.abspath(uri))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".put-")  # a write cut short is no snapshot
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, uri)
        return digest

    def get(self, digest: str) -> dict[str, str]:
        """The files of `digest` (a copy), verified against it and their names checked, each time
        the object is read (the verified files are kept in memory for the process)."""
        return dict(_load(self.root, digest))


@functools.lru_cache(maxsize=4)
def _load(root: str, digest: str) -> dict[str, str]:
    from apache_beam.io.filesystems import CompressionTypes, FileSystems
    uri = SnapshotStore(root).uri(digest)
    try:
        with FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            data = f.read(MAX_STORED_BYTES + 1)
    except Exception as e:  # Beam wraps a missing object in several error types
        raise SnapshotError(f"snapshot {uri} cannot be read: {type(e).__name__}: {e}"[:800]) from None
    try:
        inflate = zlib.decompressobj(wbits=31)  # gzip, bounded: a stored bomb inflates no further
        text = inflate.decompress(data, MAX_STORED_BYTES + 1)
        if len(data) > MAX_STORED_BYTES or len(text) > MAX_STORED_BYTES:
            raise SnapshotError(f"snapshot {uri} is over {MAX_STORED_BYTES} bytes (the size limit)")
        files = json.loads(text)
    except (zlib.error, ValueError, RecursionError) as e:
        if isinstance(e, SnapshotError):
            raise
        raise SnapshotError(f"snapshot {uri} is not gzipped JSON: {e}") from None
    if (not isinstance(files, dict) or not all(isinstance(t, str) for t in files.values())
            or snapshot_digest(files) != digest):
        raise SnapshotError(f"snapshot {uri} does not match its digest {digest}; "
                            f"the object is corrupt or was changed")
    return check_files(files, f"snapshot {uri}")
