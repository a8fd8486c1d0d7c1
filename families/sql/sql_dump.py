"""A guarded database as data (tables, columns, rows, keys) and back as an SQL script.

Used to turn a Spider-style SQLite file into a task's `fixture`, and to write the perturbed copies
of a fixture that serve as its hidden variants (sql_variants.py). Written here rather than with
`sqlite3.Connection.iterdump`, whose scripts may carry `PRAGMA writable_schema` and writes to
`sqlite_master` (which the guard refuses), and which knows nothing of the rows we changed.
The script creates the tables, inserts the rows (each table's columns named, so generated
columns are left to SQLite), then creates indexes, triggers and views: a trigger never fires on
the rows that a fixture's own statements already produced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flywheel.families.sql.sqlite_guard import GuardedDatabase, quote_name


@dataclass(frozen=True)
class TableData:
    name: str
    columns: tuple[str, ...]          # the columns an INSERT gives (generated ones left out)
    rows: tuple[tuple, ...]
    primary: frozenset[str] = frozenset()  # lower-cased: the primary key, columns keys point at
    foreign: frozenset[str] = frozenset()  # lower-cased: foreign keys, other names ending in `id`

    @property
    def keys(self) -> frozenset[str]:
        return self.primary | self.foreign


@dataclass(frozen=True)
class Snapshot:
    schema: tuple[tuple[str, str, str], ...]   # (type, name, sql), in creation order
    tables: tuple[TableData, ...]

    @property
    def row_count(self) -> int:
        return sum(len(t.rows) for t in self.tables)


def snapshot(db: GuardedDatabase) -> Snapshot:
    """Everything of `db` a script needs to rebuild it."""
    names = db.table_names()
    referenced: set[tuple[str, str]] = set()   # (table, column) that a foreign key points at
    for name in names:
        for fk in db.pragma("foreign_key_list", name):  # id, seq, table, from, to, ...
            if fk[4]:
                referenced.add((str(fk[2]).lower(), str(fk[4]).lower()))
    tables = []
    for name in names:
        info = db.pragma("table_xinfo", name)  # cid, name, type, notnull, default, pk, hidden
        columns = tuple(c[1] for c in info if c[6] == 0)
        primary = {c[1].lower() for c in info if c[5]}
        primary |= {c.lower() for c in columns if (name.lower(), c.lower()) in referenced}
        foreign = {str(fk[3]).lower() for fk in db.pragma("foreign_key_list", name)}
        foreign |= {c.lower() for c in columns if c.lower().endswith("id")} - primary
        tables.append(TableData(name, columns, tuple(db.rows(name, list(columns))),
                                frozenset(primary), frozenset(foreign - primary)))
    return Snapshot(tuple(db.schema()), tuple(tables))


def literal(value) -> str:
    """`value` as an SQL literal that reads back as the same value and type."""
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NULL"  # SQLite stores NaN as NULL
        return repr(value) if math.isfinite(value) else ("1e999" if value > 0 else "-1e999")
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    text = str(value)
    if "\0" in text:  # a script cannot carry NUL: the text's bytes, cast back
        return f"CAST(X'{text.encode('utf-8', 'surrogatepass').hex()}' AS TEXT)"
    return "'" + text.replace("'", "''") + "'"


def script(snap: Snapshot, tables: tuple[TableData, ...] | None = None) -> str:
    """An SQL script that rebuilds `snap` (with `tables`' rows in place of its own, if given)."""
    parts = ["BEGIN;"]
    parts += [f"{sql}\n;" for kind, _, sql in snap.schema if kind == "table"]
    for table in tables if tables is not None else snap.tables:
        into = f"INSERT INTO {quote_name(table.name)} ({', '.join(map(quote_name, table.columns))}) VALUES"
        parts += [f"{into} ({', '.join(map(literal, row))});" for row in table.rows]
    parts += [f"{sql}\n;" for kind, _, sql in snap.schema if kind != "table"]
    parts.append("COMMIT;")
    return "\n".join(parts)


def schema_text(snap: Snapshot) -> str:
    """The CREATE TABLE statements: what a prompt shows of the database."""
    return "\n".join(f"{sql};" for kind, _, sql in snap.schema if kind == "table")
