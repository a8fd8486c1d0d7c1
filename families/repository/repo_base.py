"""A stored snapshot as a read-only base on this machine, which each call's sandbox mounts.

A stored repository (`{"snapshot": DIGEST, ...}`: SWE-bench rows, users' folders and archives)
can be tens of megabytes; sending it into every tool call costs more than the call. So each
machine writes it out once, under its digest (`$FLYWHEEL_SNAPSHOT_CACHE`, default
`<tmp>/flywheel-snapshots-<uid>/<hex>/`: `tree/` with the files, world-readable for the
sandbox's unprivileged uid, and `manifest.json`, path -> sha256 of its bytes), and every call
mounts it read-only at BASE_MOUNT. The harness copies it into the sandbox's writable work dir (the
writable layer), lays the episode's changes over it, and uses the manifest to know which files
a call changed without hashing the rest.

The names come from a snapshot, which is untrusted: each must be a plain relative path
(snapshot_paths.py) or nothing is written. The tree is written into a fresh private folder
(mkdtemp), files created exclusively and never through a link, then renamed into place, so a
half-written base is never used and no name or planted link can lead a write elsewhere. What is
found in the cache is not trusted either: the cache folder and each base must be this user's
and writable by no one else, and a base is checked against the files (manifest and every file's
bytes) the first time a process uses it; one that does not match is written again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading

from flywheel.families.repository.snapshot_paths import SnapshotError, check_files

BASE_MOUNT = "/opt/flywheel-repo"  # where a call's sandbox sees the base
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
_checked: set[str] = set()  # bases this process has checked against their files
_lock = threading.Lock()


def cache_root() -> str:
    return os.environ.get("FLYWHEEL_SNAPSHOT_CACHE") or os.path.join(
        tempfile.gettempdir(), f"flywheel-snapshots-{os.geteuid()}")


def _private(path: str, what: str) -> None:
    """SnapshotError unless `path` is a real folder of this user that no one else can write."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SnapshotError(f"{what} {path} is not a folder of this user that only it can write "
                            f"(a link, or another user's); set FLYWHEEL_SNAPSHOT_CACHE to a "
                            f"folder of your own")


def materialized(files: dict[str, str], digest: str) -> str:
    """The host folder holding `files` (the snapshot `digest`) as `tree/` plus `manifest.json`,
    written once per machine and checked once per process."""
    match = _DIGEST.fullmatch(digest) if isinstance(digest, str) else None
    if match is None:
        raise SnapshotError(f"{digest!r} is not a snapshot digest (sha256:<64 hex digits>)")
    root = cache_root()
    folder = os.path.join(root, match.group(1))
    with _lock:
        if folder in _checked and os.path.isdir(folder):
            return folder
    check_files(files, f"snapshot {digest}")  # before anything is made
    os.makedirs(root, mode=0o755, exist_ok=True)
    info = os.lstat(root)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
        os.chmod(root, 0o755)  # ours: whatever the umask made it, no one else writes there
    _private(root, "the snapshot cache")
    if os.path.lexists(folder):
        _private(folder, "the cached snapshot")
        if _matches(folder, files):
            with _lock:
                _checked.add(folder)
            return folder
        _discard(folder)  # not what its name says: written again below
    _write(root, folder, files)
    with _lock:
        _checked.add(folder)
    return folder


def _manifest(files: dict[str, str]) -> dict[str, str]:
    return {rel: hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
            for rel, text in files.items()}


def _matches(folder: str, files: dict[str, str]) -> bool:
    """Whether `folder` holds exactly `files` (its manifest and every file's bytes), with no link."""
    expected = _manifest(files)
    try:
        with open(os.path.join(folder, "manifest.json"), "rb") as f:
            if json.loads(f.read(len(json.dumps(expected)) + 1)) != expected:
                return False
        found = set()
        tree = os.path.join(folder, "tree")
        for here, dirs, names in os.walk(tree):
            for name in dirs + names:
                path = os.path.join(here, name)
                if os.path.islink(path):
                    return False
                if name in names:
                    found.add(os.path.relpath(path, tree).replace(os.sep, "/"))
        if found != set(files):
            return False
        for rel, sha in expected.items():
            fd = os.open(os.path.join(tree, rel), os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != sha:
                    return False
    except (OSError, ValueError):
        return False
    return True


def _write(root: str, folder: str, files: dict[str, str]) -> None:
    tmp = tempfile.mkdtemp(dir=root, prefix=f".{os.path.basename(folder)}.")  # 0700: ours alone
    try:
        os.mkdir(os.path.join(tmp, "tree"), 0o755)
        for rel, text in files.items():  # names checked: plain relative paths, no folder a file
            parts = rel.split("/")
            here = os.path.join(tmp, "tree")
            for part in parts[:-1]:
                here = os.path.join(here, part)
                if not os.path.isdir(here):
                    os.mkdir(here, 0o755)
            fd = os.open(os.path.join(here, parts[-1]),
                         os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(text.encode("utf-8", "surrogatepass"))
        with open(os.path.join(tmp, "manifest.json"), "x", encoding="utf-8") as f:
            json.dump(_manifest(files), f)
        for here, dirs, names in os.walk(tmp):  # umask aside: readable by the sandbox's uid
            os.chmod(here, 0o755)
            for name in names:
                os.chmod(os.path.join(here, name), 0o644)
        os.rename(tmp, folder)
    except OSError:  # another process wrote it first (theirs is checked on next use), or a failure
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.isdir(folder):
            raise


def _discard(folder: str) -> None:
    aside = tempfile.mkdtemp(dir=os.path.dirname(folder), prefix=".discard.")
    os.rename(folder, os.path.join(aside, "old"))
    shutil.rmtree(aside, ignore_errors=True)
