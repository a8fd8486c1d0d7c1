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
read into a guarded in-memory SQLite (sqlite_guard.py), never opened by SQLite on disk. A
SWE-bench row's repository is a local snapshot: `repo_path`, or `<instance_id>/` (a folder),
`<instance_id>.tar.gz` (`.tgz`, `.zip`) beside the task file or under `repos/` there; the repo
domain reads it into the snapshot store (repo_snapshot.py). Each format turns a row into its domain's task fields (`to_task`); a row
without `task_id` gets one from a hash of its content, the same on every read. The formats'
identifying fields do not overlap, so at most one matches a row.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flywheel.domains.math_answer import INSTRUCTION as MATH_INSTRUCTION
from flywheel.domains.sql_dump import schema_text, script, snapshot
from flywheel.domains.sqlite_guard import MAX_BYTES, GuardedDatabase, SqlInputError
from flywheel.domains.repo_snapshot import ARCHIVES, split_commit
from flywheel.domains.task_paths import inside_folder
from flywheel.domains.untrusted_text import boxed
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
            return f"field `{name}` must be a non-empty string, got {_shape(row.get(name))}"
    for name in optional_texts:
        if row.get(name) is not None and not isinstance(row[name], str):
            return f"field `{name}` must be a string, got {_shape(row[name])}"
    task_id = row.get("task_id")
    if task_id is not None and (isinstance(task_id, bool) or not isinstance(task_id, (str, int))):
        return f"field `task_id` must be a string or an integer, got {_shape(task_id)}"
    return None


def _shape(value: Any) -> str:
    """A short description of a wrong value: `null`, a number as written, else its type."""
    if value is None:
        return "null"
    if isinstance(value, float) or (isinstance(value, int) and value.bit_length() < 64):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


TASK_FORMATS: Registry[TaskFormat] = Registry("task format", home="flywheel.domains.task_formats")


def task_format(name, title, domain, fields, check=lambda row: None, texts=(), optional_texts=()):
    """Decorator: register the decorated `to_task` as format `name`; it reads `texts` (and
    `optional_texts` where given) as strings, checked before it is called (TaskFormat.read)."""
    def register(to_task):
        TASK_FORMATS.register(name, TaskFormat(name, title, domain, fields, check, to_task,
                                               texts, optional_texts))
        return to_task
    return register


def _task_id(row: dict, name: str, *keys: str) -> str:
    if row.get("task_id") not in (None, ""):
        return str(row["task_id"])
    content = json.dumps([row.get(k) for k in keys], sort_keys=True, default=str)
    return f"{name}-{hashlib.sha256(content.encode()).hexdigest()[:12]}"


# -- Python unit tests -------------------------------------------------------------------------
@task_format("humaneval", "HumanEval", "python_tests", ("prompt", "entry_point", "test"),
             texts=("prompt", "entry_point", "test"), optional_texts=("canonical_solution",))
def _humaneval(row: dict, folder: str) -> dict:
    return {**row, "task_id": _task_id(row, "humaneval", "prompt", "test")}


def _mbpp_check(row: dict) -> str | None:
    if "text" not in row and "prompt" not in row:
        return "it has no `text` (or `prompt`) field"
    if not isinstance(row["test_list"], list):
        return "field `test_list` is not a list of asserts"
    return None


def _mbpp_texts(row: dict) -> None:
    description = "text" if "text" in row else "prompt"
    problem = field_types(row, (description,), ("code", "test_setup_code"))
    bad = next((i for i, t in enumerate(row["test_list"]) if not isinstance(t, str)), None)
    problem = problem or (f"field `test_list[{bad}]` must be an assert (a string), got "
                          f"{_shape(row['test_list'][bad])}" if bad is not None else None)
    if problem:
        raise FormatError(problem)


@task_format("mbpp", "MBPP", "python_tests", ("code", "test_list"), _mbpp_check)
def _mbpp(row: dict, folder: str) -> dict:
    _mbpp_texts(row)
    task = dict(row)
    if "text" not in task:  # MBPP "sanitized" names the description `prompt`
        task["text"] = task.pop("prompt")
    task.pop("prompt", None)  # python_tests renders it from `text` and the visible tests
    task_id = row.get("task_id")
    task["task_id"] = (f"mbpp/{task_id}" if isinstance(task_id, int)
                       else _task_id(row, "mbpp", "text", "prompt", "test_list"))
    return task


# -- math answers ------------------------------------------------------------------------------
def gsm8k_final(answer: str) -> str | None:
    """The text after the `####` that ends a GSM8K answer (on its own last line, or on the line
    before with nothing but whitespace after it), stripped; None when there is none. With str
    methods only: a task file is untrusted input, and the pattern it replaces
    (`####\\s*([^\\n]+?)\\s*$`) is quadratic in a long run of spaces."""
    body = answer.rstrip()
    last_line = body.rfind("\n") + 1
    before = body.rfind("####", 0, last_line)
    if before >= 0 and not body[before + 4:last_line].strip():
        return body[before + 4:].strip() or None
    first = body.find("####", last_line)
    return body[first + 4:].strip() or None if first >= 0 else None


def _gsm8k_check(row: dict) -> str | None:
    answer = row["answer"]
    if not isinstance(answer, str) or gsm8k_final(answer) is None:
        return "field `answer` does not end in '#### N'"
    return None


@task_format("gsm8k", "GSM8K", "math", ("question", "answer"), _gsm8k_check, texts=("question",))
def _gsm8k(row: dict, folder: str) -> dict:
    solution = row["answer"]
    final = gsm8k_final(solution).replace(",", "").replace("$", "").strip()
    task = {k: v for k, v in row.items() if k not in ("question", "answer")}
    return {**task, "task_id": _task_id(row, "gsm8k", "question"),
            "prompt": f"{row['question']}{MATH_INSTRUCTION}", "answer": final,
            "solution": solution[:solution.rindex("####")].strip()}


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (or \\fbox{...}) in `text`, braces balanced (in one
    pass: a task file is untrusted input, and unclosed boxes must not cost a scan each)."""
    contents = boxed(text)
    return contents[-1] if contents else None


def _math_check(row: dict) -> str | None:
    if not isinstance(row["solution"], str) or last_boxed(row["solution"]) is None:
        return "field `solution` holds no \\boxed{...} answer"
    return None


@task_format("math", "MATH", "math", ("problem", "solution"), _math_check, texts=("problem",),
             optional_texts=("unique_id",))
def _math(row: dict, folder: str) -> dict:
    task = {k: v for k, v in row.items() if k not in ("problem", "answer")}
    task_id = row.get("task_id") or row.get("unique_id")  # MATH-500 names its rows unique_id
    return {**task, "task_id": str(task_id) if task_id else _task_id(row, "math", "problem"),
            "prompt": f"{row['problem']}{MATH_INSTRUCTION}",
            "answer": last_boxed(row["solution"]).strip()}


# -- SQL ---------------------------------------------------------------------------------------
SQL_TEXT_FIELDS = ("fixture", "schema", "db_schema", "context")
SQL_FILE_FIELDS = ("db_path", "database")


def _spider_check(row: dict) -> str | None:
    if not any(row.get(f) for f in (*SQL_TEXT_FIELDS, *SQL_FILE_FIELDS, "db_id")):
        return ("it names no database (SQL text in " + ", ".join(f"`{f}`" for f in SQL_TEXT_FIELDS)
                + "; a SQLite file in `db_path`; or Spider's `db_id`)")
    return None


def _sqlite_file(row: dict, folder: str) -> str:
    """The real path of the row's SQLite file, which must lie inside the task file's folder."""
    for name in SQL_FILE_FIELDS:
        if row.get(name):
            return inside_folder(folder, str(row[name]), name)
    db_id = str(row["db_id"])
    return inside_folder(folder, os.path.join("database", db_id, f"{db_id}.sqlite"), "db_id")


def _dump_sqlite(path: str, field: str) -> tuple[str, str]:
    """(CREATE statements, the whole database as an SQL script) of a local SQLite file. SQLite
    never opens the file: its bytes are read (no symlink as the last step, a regular file, at
    most MAX_BYTES) and deserialized into a guarded in-memory database."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise FormatError(f"the SQLite database {path} is not a local file (field `{field}`: "
                          f"{e.strerror}; give the database as SQL text in `fixture` instead)") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FormatError(f"field `{field}`: {path} is not a regular file")
        if info.st_size > MAX_BYTES:
            raise FormatError(f"field `{field}`: the SQLite database {path} is {info.st_size} "
                              f"bytes; at most {MAX_BYTES} are read")
        with os.fdopen(os.dup(fd), "rb") as f:
            image = f.read(MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        with GuardedDatabase(image=image) as db:
            snap = snapshot(db)
    except SqlInputError as e:
        raise FormatError(f"field `{field}`: cannot read the SQLite database {path}: {e}") from None
    return schema_text(snap), script(snap)


@task_format("spider", "Spider-like SQL", "sql", ("question", "query"), _spider_check,
             texts=("question", "query"), optional_texts=(*SQL_TEXT_FIELDS, *SQL_FILE_FIELDS, "db_id"))
def _spider(row: dict, folder: str) -> dict:
    text = next((row[f] for f in SQL_TEXT_FIELDS if row.get(f)), None)
    field = next((f for f in (*SQL_FILE_FIELDS, "db_id") if row.get(f)), "db_id")
    shown, fixture = (text, text) if text else _dump_sqlite(_sqlite_file(row, folder), field)
    task = {k: v for k, v in row.items() if k not in ("question", "query", *SQL_TEXT_FIELDS)}
    return {**task, "task_id": _task_id(row, "spider", "question", "query", "db_id"),
            "prompt": f"SQLite database:\n{shown}\n\nWrite one SQL query that answers: "
                      f"{row['question']}",
            "fixture": fixture, "reference_query": row["query"]}


# -- SWE-bench --------------------------------------------------------------------------------
SWEBENCH_SNAPSHOTS = ("{id}", "{id}.tar.gz", "{id}.tgz", "{id}.zip")
SWEBENCH_FIELDS = ("environment_setup_commit", "version", "base_commit")


def _swebench_check(row: dict) -> str | None:
    if not isinstance(row["problem_statement"], str) or not row["problem_statement"]:
        return "field `problem_statement` is not a non-empty string"
    return None


def _node_ids(row: dict, name: str) -> list[dict]:
    """Checks of a FAIL_TO_PASS/PASS_TO_PASS list of pytest node ids (or its JSON text, as
    SWE-bench's Hugging Face dataset stores it)."""
    value = row.get(name) or []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FormatError(f"field `{name}` must be a list of pytest node ids (or its JSON text)")
    return [{"id": node, "pytest": node} for node in value]


def _swebench_snapshot(row: dict, folder: str) -> str:
    """The row's snapshot path relative to `folder` (checked inside it): `repo_path`, else the
    first of `<instance_id>` (a folder or an archive), beside the task file or under `repos/`."""
    if "://" in folder:
        raise FormatError(f"the task file is on {folder.split('://')[0]}://; SWE-bench rows need "
                          f"the repository snapshot locally, beside a local task file")
    if row.get("repo_path"):
        candidates, field = [str(row["repo_path"])], "repo_path"
    else:
        name = str(row["instance_id"])
        candidates = [os.path.join(top, pattern.format(id=name)) for top in ("", "repos")
                      for pattern in SWEBENCH_SNAPSHOTS]
        field = "instance_id"
    for relative in candidates:
        path, commit = split_commit(relative)
        real = inside_folder(folder, path, field)
        archive = commit is None and relative.endswith(ARCHIVES)
        if os.path.isfile(real) if archive else os.path.isdir(real):
            return relative
    looked = ", ".join(os.path.join(folder, c) for c in candidates)
    raise FormatError(f"no repository snapshot for {row['instance_id']!r}: looked for {looked}; "
                      f"SWE-bench rows need the repository snapshot locally (a folder or "
                      f".tar.gz/.tgz/.zip archive, or name it in `repo_path`)")


@task_format("swebench", "SWE-bench", "repo", ("instance_id", "problem_statement", "FAIL_TO_PASS"),
             _swebench_check, texts=("instance_id",),
             optional_texts=("repo_path", "patch", "test_patch", "repo", "image", "image_name",
                             "environment", *SWEBENCH_FIELDS))
def _swebench(row: dict, folder: str) -> dict:
    task = {"task_id": str(row["instance_id"]), "prompt": row["problem_statement"],
            "repo": {"path": _swebench_snapshot(row, folder)}, "_folder": folder,
            "reference_patch": row.get("patch") or "", "test_patch": row.get("test_patch") or "",
            "hidden_tests": _node_ids(row, "FAIL_TO_PASS"),
            "regression_tests": _node_ids(row, "PASS_TO_PASS")}
    if row.get("repo"):
        task["github_repo"] = row["repo"]
    # `environment`: the name of the packages its pytest checks run with (`flywheel env build`);
    # `image` (or `image_name`, as SWE-bench's harness names it): the docker image they run in;
    # `limits`: its calls' sandbox limits (a real repository's tests take longer than 10 s)
    if row.get("image") or row.get("image_name"):
        task["image"] = row.get("image") or row["image_name"]
    return {**task, **{k: row[k] for k in (*SWEBENCH_FIELDS, "split", "environment", "limits") if k in row}}


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
