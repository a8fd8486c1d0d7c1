"""Published task formats, recognised on sight by their fields, for rows that name no `domain`.

| format | identifying fields | runs as domain |
| --- | --- | --- |
| HumanEval | `prompt`, `entry_point`, `test` | python_tests (as is) |
| MBPP | `text` (or `prompt`), `code`, `test_list` | python_tests |
| GSM8K | `question`, `answer` ending in `#### N` | math (answer N) |
| MATH | `problem`, `solution` with `\\boxed{...}` | math (answer: the last box) |
| Spider-like SQL | `question`, `query`, a database | sql |
| SWE-bench | `instance_id`, `problem_statement`, `FAIL_TO_PASS`, a local snapshot | repo |

A Spider-like row's database is SQL text (`fixture`, `schema`, `db_schema` or `context`), or a
local SQLite file: `db_path`/`database`, or Spider's own layout, `database/<db_id>/<db_id>.sqlite`
beside the task file. Task files are untrusted: a file a row names must lie inside the task
file's own folder (task_paths.py: no absolute path, no `..` or symlink out), and its database is
read into a guarded in-memory SQLite (families/sql/sqlite_guard.py), never opened by SQLite on disk. A
SWE-bench row's repository is a local snapshot: `repo_path`, or `<instance_id>/` (a folder),
`<instance_id>.tar.gz` (`.tgz`, `.zip`) beside the task file or under `repos/` there; the repo
domain reads it into the snapshot store (families/repository/repo_snapshot.py). Each format lives
with its family (families/<family>/formats.py, registered by `@task_format`; this module is the
registry and the recognition) and turns a row into its domain's task fields (`to_task`); a row
without `task_id` gets one from a hash of its content, the same on every read. The formats'
identifying fields do not overlap, so at most one matches a row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flywheel.registry import Registry


class FormatError(ValueError):
    """A row in a recognised format whose content cannot become a task ("field `x`: ...")."""


@dataclass(frozen=True)
class TaskFormat:
    name: str                              # short id: humaneval, mbpp, gsm8k, math, spider
    title: str                             # as people write it: HumanEval, GSM8K, ...
    domain: str                            # the registered domain its tasks run as
    fields: tuple[str, ...]                # the identifying fields, all present
    check: Callable[[dict], str | None]    # why a row with those fields is not this format
    to_task: Callable[[dict, str], dict]   # (row, the task file's folder) -> the domain's fields
    texts: tuple[str, ...] = ()            # fields that must be non-empty strings
    optional_texts: tuple[str, ...] = ()   # fields that must be strings where given (not null)

    def describe(self) -> str:
        return f"{self.title} ({', '.join(self.fields)})"

    def read(self, row: dict, folder: str) -> dict:
        """The domain's task fields of `row` (`to_task`), once every field it reads has the type
        it reads it as: FormatError naming the first field that has not."""
        problem = field_types(row, self.texts, self.optional_texts)
        if problem:
            raise FormatError(problem)
        return self.to_task(row, folder)


def field_types(row: dict, texts=(), optional_texts=()) -> str | None:
    """Why `row`'s fields are not the types a format reads them as ("field `x` must be ..."), or
    None: `texts` non-empty strings, `optional_texts` strings where given, `task_id` a string or
    an integer where given."""
    for name in texts:
        if not (isinstance(row.get(name), str) and row[name].strip()):
            return f"field `{name}` must be a non-empty string, got {shape_of(row.get(name))}"
    for name in optional_texts:
        if row.get(name) is not None and not isinstance(row[name], str):
            return f"field `{name}` must be a string, got {shape_of(row[name])}"
    task_id = row.get("task_id")
    if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, (str, int))):
        return f"field `task_id` must be a string or an integer, got {shape_of(task_id)}"
    return None


def shape_of(value: Any) -> str:
    """A short description of a wrong value: `null`, a number as written, else its type."""
    if value is None:
        return "null"
    if isinstance(value, float) or (isinstance(value, int) and value.bit_length() < 64):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


TASK_FORMATS: Registry[TaskFormat] = Registry("task format", home=("flywheel.domains.task_formats", "flywheel.families.*"))


def task_format(name, title, domain, fields, check=lambda row: None, texts=(), optional_texts=()):
    """Decorator: register the decorated `to_task` as format `name`; it reads `texts` (and
    `optional_texts` where given) as strings, checked before it is called (TaskFormat.read)."""
    def register(to_task):
        TASK_FORMATS.register(name, TaskFormat(name, title, domain, fields, check, to_task,
                                               texts, optional_texts))
        return to_task
    return register


def task_id_of(row: dict, name: str, *keys: str) -> str:
    if row.get("task_id") not in (None, ""):
        return str(row["task_id"])
    content = json.dumps([row.get(k) for k in keys], sort_keys=True, default=str)
    return f"{name}-{hashlib.sha256(content.encode()).hexdigest()[:12]}"


# -- recognition -------------------------------------------------------------------------------
def recognise(row: dict[str, Any]) -> tuple[TaskFormat | None, str | None]:
    """(the format the row is in, None) or (None, why it is almost one of them, or None)."""
    near = None
    for _, fmt in TASK_FORMATS.items():
        if all(f in row for f in fmt.fields):
            why = fmt.check(row)
            if why is None:
                return fmt, None
            near = near or f"looks like {fmt.describe()}, but {why}"
    return None, near


def known_formats() -> str:
    return "; ".join(f.describe() for _, f in TASK_FORMATS.items())
