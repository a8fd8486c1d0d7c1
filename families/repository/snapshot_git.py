"""A commit of a task's git repository, read as data: plumbing only, under a config of our own.

The repository a task names (`PATH@COMMIT`) is untrusted. `git archive` applies its attributes
(filters and process drivers are commands, run on the host), and any git command reads the
repository's own config (`core.fsmonitor`, `include.path`, aliases, hooks paths, a promisor
remote that fetches). So the commit is read with plumbing that applies no filter or attribute
(`rev-parse`, `ls-tree -r -z -l`, `cat-file --batch`), from a private GIT_DIR: a temporary
folder with an empty config of our own, the repository's HEAD copied, its refs linked and its
objects named by GIT_OBJECT_DIRECTORY; no system, global or repository config is ever read, and
the environment carries no GIT_* variable of the user's. The `.git` must be a directory whose
real path lies inside the repository's folder (a `.git` file points at another repository); its
objects, refs and HEAD may not link out, nor may its objects borrow from another repository
(objects/info/alternates). Entries are bounded as every other source's are (repo_snapshot.py).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator

from flywheel.families.repository.snapshot_paths import SnapshotError

COMMIT = re.compile(r"[0-9A-Za-z_][0-9A-Za-z._/~^-]*")
LISTING_BYTES = 64 << 20  # the most `ls-tree` output read (names of every entry)
_BLOB_MODES = {"100644", "100755"}


def _inside(root: str, path: str) -> bool:
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def git_dir(repo: str) -> str:
    """The repository's git directory, proven to lie inside `repo`, or SnapshotError saying why not."""
    real = os.path.realpath(repo)
    if not os.path.isdir(real):
        raise SnapshotError("no such git repository")
    dot = os.path.join(real, ".git")
    if os.path.lexists(dot):
        if os.path.islink(dot) or not os.path.isdir(dot):
            raise SnapshotError("its .git is a file or a link, which points at another repository "
                                "(a worktree or submodule); give the repository's own folder")
        gitdir = dot
    elif os.path.isdir(os.path.join(real, "objects")) and os.path.isfile(os.path.join(real, "HEAD")):
        gitdir = real  # a bare repository
    else:
        raise SnapshotError("not a git repository (no .git folder)")
    for name in ("HEAD", "objects", "refs", "packed-refs", "shallow"):
        path = os.path.join(gitdir, name)
        if os.path.lexists(path) and not _inside(real, path):
            raise SnapshotError(f".git/{name} leads out of the repository's folder")
        if name not in ("objects", "refs") and os.path.lexists(path) and not os.path.isfile(path):
            raise SnapshotError(f".git/{name} is not a plain file")
    for name in ("objects", "refs"):
        for here, dirs, files in os.walk(os.path.join(gitdir, name)):
            for entry in dirs + files:  # git makes neither links nor pipes or devices here
                mode = os.lstat(os.path.join(here, entry)).st_mode
                if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                    raise SnapshotError(f".git/{name} holds a link or a special file "
                                        f"({os.path.relpath(os.path.join(here, entry), gitdir)})")
    alternates = os.path.join(gitdir, "objects", "info", "alternates")
    if os.path.lexists(alternates) and _small_read(alternates).strip():
        raise SnapshotError("its objects are borrowed from another repository "
                            "(objects/info/alternates); `git repack -a -d` and remove that file first")
    return gitdir


def _small_read(path: str, limit: int = 1 << 16) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not os.path.isfile(path):
            return b""
        return f.read(limit)


def _private_dir(gitdir: str, into: str) -> dict[str, str]:
    """A GIT_DIR at `into` that borrows the repository's HEAD, refs and objects and nothing else;
    the environment every git command runs with."""
    with open(os.path.join(into, "config"), "w") as f:
        f.write("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
    with open(os.path.join(into, "HEAD"), "wb") as f:
        f.write(_small_read(os.path.join(gitdir, "HEAD")))
    for name in ("refs", "packed-refs", "shallow"):
        if os.path.lexists(os.path.join(gitdir, name)):
            os.symlink(os.path.realpath(os.path.join(gitdir, name)), os.path.join(into, name))
    os.makedirs(os.path.join(into, "refs"), exist_ok=True)
    return {"PATH": os.environ.get("PATH", os.defpath), "GIT_DIR": into,
            "GIT_OBJECT_DIRECTORY": os.path.realpath(os.path.join(gitdir, "objects")),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_ATTR_NOSYSTEM": "1",
            "HOME": into, "XDG_CONFIG_HOME": into, "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1", "GIT_OPTIONAL_LOCKS": "0", "GIT_ALLOW_PROTOCOL": "none",
            "LC_ALL": "C"}


def git_entries(repo: str, commit: str, max_entries: int, max_file_bytes: int
                ) -> Iterator[tuple[str, bytes | None, str | None]]:
    """(path, bytes, None) or (path, None, why skipped) for every entry of `commit`'s tree;
    SnapshotError when the repository or commit cannot be read, or has over `max_entries`."""
    if not COMMIT.fullmatch(commit):
        raise SnapshotError(f"{commit!r} is not a commit name")
    gitdir = git_dir(repo)
    git = shutil.which("git")
    if git is None:
        raise SnapshotError("git is not installed")
    with tempfile.TemporaryDirectory(prefix="flywheel-git-") as own:
        env = _private_dir(gitdir, own)
        found = subprocess.run([git, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
                               capture_output=True, env=env, cwd=own, timeout=60)
        oid = found.stdout.decode("ascii", "replace").strip()
        if found.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", oid):
            raise SnapshotError(f"git could not find commit {commit!r} "
                                f"{found.stderr.decode('utf-8', 'replace').strip()[:300]}".strip())
        listing = _listing(git, oid, env, own, max_entries)
        with subprocess.Popen([git, "cat-file", "--batch"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                              cwd=own) as batch:
            try:
                for mode, blob, size, path in listing:
                    if mode == "120000":
                        yield path, None, "a link"
                    elif mode == "160000":
                        yield path, None, "a submodule (not read)"
                    elif mode not in _BLOB_MODES:
                        yield path, None, "a special file"
                    elif size > max_file_bytes:
                        yield path, None, f"over the per-file limit ({max_file_bytes} bytes)"
                    else:
                        yield path, _blob(batch, blob, size), None
            finally:
                batch.kill()


def _listing(git: str, oid: str, env: dict, cwd: str, max_entries: int
             ) -> list[tuple[str, str, int, str]]:
    """(mode, object id, size or -1, path) of every entry of the commit's tree, bounded."""
    proc = subprocess.Popen([git, "ls-tree", "-r", "-z", "-l", "--full-tree", oid],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    entries, rest, read = [], b"", 0
    try:
        while chunk := proc.stdout.read(1 << 20):
            read += len(chunk)
            if read > LISTING_BYTES:
                raise SnapshotError(f"its tree lists over {LISTING_BYTES} bytes of names")
            *records, rest = (rest + chunk).split(b"\0")
            for record in records:
                head, _, name = record.partition(b"\t")
                mode, _, blob, size = (head.decode("ascii", "replace").split() + ["", "", "", ""])[:4]
                entries.append((mode, blob, int(size) if size.isdigit() else -1,
                                name.decode("utf-8", "surrogateescape")))
            if len(entries) > max_entries:
                raise SnapshotError(f"more than {max_entries} entries (the file-count limit)")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    error = proc.stderr.read().decode("utf-8", "replace").strip()
    if proc.wait() != 0:
        raise SnapshotError(f"git ls-tree failed: {error[:300]}")
    return entries


def _blob(batch: subprocess.Popen, blob: str, size: int) -> bytes:
    """The bytes of object `blob` (at most `size` of them, as ls-tree said) from `cat-file --batch`."""
    batch.stdin.write(blob.encode("ascii") + b"\n")
    batch.stdin.flush()
    header = batch.stdout.readline(200).decode("ascii", "replace").split()
    if len(header) != 3 or header[1] != "blob" or not header[2].isdigit() or int(header[2]) != size:
        raise SnapshotError(f"git cat-file gave an unexpected answer for {blob}: {' '.join(header)}")
    data = batch.stdout.read(size)
    if len(data) != size or batch.stdout.read(1) != b"\n":  # a newline ends each object
        raise SnapshotError(f"git cat-file stopped inside object {blob}")
    return data
