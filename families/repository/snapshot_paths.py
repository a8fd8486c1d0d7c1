"""File names of a repository snapshot: each must be a plain relative path that stays in its root.

A snapshot's names come from untrusted places: a folder or an archive a task names, a git tree,
a task row's inline `repo.files`, an object in a snapshot store (whose digest anyone can compute
for any names). They are later written on this machine (repo_base.py) and in the sandbox, so a
name is accepted only in one canonical form that cannot lead anywhere but under its root once
joined to it: relative, `/`-separated, no empty, `.` or `..` component, no NUL, newline or other
control character, no backslash (a separator elsewhere), valid UTF-8, within length limits. And a
name may not be both a file and a folder ("a" and "a/b"), which no tree can hold.
"""

from __future__ import annotations

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255


class SnapshotError(ValueError):
    """A snapshot that cannot be read or stored (naming the source, member, limit or URI)."""


def name_problem(path: object) -> str | None:
    """Why `path` cannot name a file of a snapshot, or None when it is a canonical relative path."""
    if not isinstance(path, str) or not path:
        return "not a file name"
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        return "a file name that is not UTF-8"
    if len(raw) > MAX_PATH_BYTES:
        return f"a file name over {MAX_PATH_BYTES} bytes"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "a file name with a control character (NUL, newline, ...)"
    if "\\" in path:
        return "a file name with a backslash"
    if path.startswith("/"):
        return "an absolute file name"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return "a file name with an empty, `.` or `..` component"
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return f"a file name with a component over {MAX_NAME_BYTES} bytes"
    return None


def shown(path: object) -> str:
    """`path` as printable text for a message or a `skipped` listing (never raises)."""
    if isinstance(path, str) and name_problem(path) is None:
        return path
    return ascii(path)


def files_problem(files: object) -> str | None:
    """Why `files` (path -> text) cannot be a snapshot, or None: a bad name, a value that is not
    text, or a name that is also another file's folder."""
    if not isinstance(files, dict):
        return "not a map of file names to text"
    for path, text in files.items():
        why = name_problem(path)
        if why:
            return f"{shown(path)}: {why}"
        if not isinstance(text, str):
            return f"{path}: not text"
    for path in files:
        head = path
        while "/" in head:
            head = head.rpartition("/")[0]
            if head in files:
                return f"{path}: lies under {head}, which is a file"
    return None


def check_files(files: object, source: str) -> dict[str, str]:
    """`files`, or SnapshotError naming `source` and the first problem (files_problem)."""
    why = files_problem(files)
    if why:
        raise SnapshotError(f"{source}: {why}; such snapshots are refused")
    return files  # type: ignore[return-value]
