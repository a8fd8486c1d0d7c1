"""The Spider-like SQL task format: rows recognised on sight, run as `sql`."""

from __future__ import annotations

import os
import stat

from flywheel.domains.task_formats import FormatError, task_format, task_id_of
from flywheel.domains.task_paths import inside_folder
from flywheel.families.sql.sql_dump import schema_text, script, snapshot
from flywheel.families.sql.sqlite_guard import MAX_BYTES, GuardedDatabase, SqlInputError


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
    return {**task, "task_id": task_id_of(row, "spider", "question", "query", "db_id"),
            "prompt": f"SQLite database:\n{shown}\n\nWrite one SQL query that answers: "
                      f"{row['question']}",
            "fixture": fixture, "reference_query": row["query"]}
