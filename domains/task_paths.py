"""Paths that a task file names: each must lie inside the task file's own folder.

A task file is untrusted input. Were its paths followed as given, a row could name
`/home/me/.ssh/known_hosts`, `../../other-project/secret.sqlite` or a symlink that leads there,
and what it reads would go into prompts and tables. So a named path must be relative, and once
every symlink is resolved (os.path.realpath) it must still be under the real folder of the task
file (os.path.commonpath); a task file on a remote filesystem (gs://...) can name no local file.
The returned path is the resolved one: what was checked is what is opened.

Every such field goes through `inside_folder`: Spider's `db_path`, `database` and `db_id`, a
SWE-bench row's snapshot, a native repo row's `repo` path. The folder is the one the task file
reader says (task_files.py), never one a row names; a row no reader placed (built in code) is
relative to the working directory.
"""

from __future__ import annotations

import os


class PathError(ValueError):
    """A path a task row names that leads out of its task file's folder ("field `x`: ...")."""


def inside_folder(folder: str, relative: str, field: str) -> str:
    """The real path of `relative` under `folder`, or PathError naming `field` and why not."""
    if "://" in folder:
        raise PathError(f"field `{field}`: a task file on {folder.split('://')[0]}:// cannot name "
                        f"a local file ({relative!r}); give the database as SQL text in `fixture`")
    if not relative or "\0" in relative:
        raise PathError(f"field `{field}`: {relative!r} is not a file name")
    if "://" in relative or os.path.isabs(relative) or relative.startswith("~"):
        raise PathError(f"field `{field}`: {relative!r} is not relative to the task file's folder "
                        f"(absolute paths and URLs are refused; name a file inside that folder)")
    base = os.path.realpath(folder or os.curdir)
    real = os.path.realpath(os.path.join(base, relative))
    if os.path.commonpath([base, real]) != base:
        raise PathError(f"field `{field}`: {relative!r} leads out of the task file's folder "
                        f"{base} (through `..` or a symbolic link); name a file inside it")
    return real
