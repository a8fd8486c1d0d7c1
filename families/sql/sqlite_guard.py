"""Task SQL under guard: an in-memory SQLite database that no statement can make touch a file.

Task files are untrusted input, and their SQL (a fixture script, a reference query, a Spider
database file's schema) runs in trusted processes: the verifier, task loading, `flywheel tasks
validate`; and in the sandbox harness, which an `unsafe-subprocess` backend does not isolate.
Every one of them opens task SQL here, and only here:

- the database is `:memory:` (or the bytes of a file, deserialized: SQLite never opens the file);
- ATTACH is impossible twice over: SQLITE_LIMIT_ATTACHED is 0 and the authorizer denies ATTACH
  and DETACH (`VACUUM INTO 'file'` is an ATTACH inside SQLite: both stop it, so does plain VACUUM);
- the authorizer allows a fixture to create, fill and change tables, indexes, views and triggers
  and to use transactions, and a query only to read (SELECT, READ, functions, recursive CTEs);
  PRAGMA only from a read-only introspection list, no virtual tables, no `load_extension`
  (extension loading is off as well), temporary data in memory, `trusted_schema` off;
- a deadline (progress handler) stops a recursive CTE or a huge INSERT...SELECT, the database has
  a page cap, strings and blobs a length cap, scripts a size cap, and a query returns at most
  `max_rows` rows.

Anything refused or broken is a `SqlInputError` (a ValueError: bad input, never a crash).
A query's SQLITE_READ callbacks name the tables it reads (`SELECT count(*) FROM t` reports `t`
with an empty column), which the `sql_result` verifier takes as evidence that the answer was
computed from the database. Standard library only: the sandbox harness imports this same file.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field

# Authorizer action codes (sqlite3.h). Python exposes them, but under names that collide with
# result codes (24 is both SQLITE_ATTACH and SQLITE_FORMAT), so they are spelled out here.
CREATE_INDEX, CREATE_TABLE, CREATE_TEMP_INDEX, CREATE_TEMP_TABLE = 1, 2, 3, 4
CREATE_TEMP_TRIGGER, CREATE_TEMP_VIEW, CREATE_TRIGGER, CREATE_VIEW = 5, 6, 7, 8
DELETE, DROP_INDEX, DROP_TABLE, DROP_TEMP_INDEX, DROP_TEMP_TABLE = 9, 10, 11, 12, 13
DROP_TEMP_TRIGGER, DROP_TEMP_VIEW, DROP_TRIGGER, DROP_VIEW, INSERT = 14, 15, 16, 17, 18
PRAGMA, READ, SELECT, TRANSACTION, UPDATE, ATTACH, DETACH = 19, 20, 21, 22, 23, 24, 25
ALTER_TABLE, REINDEX, ANALYZE, CREATE_VTABLE, DROP_VTABLE = 26, 27, 28, 29, 30
FUNCTION, SAVEPOINT, RECURSIVE = 31, 32, 33

QUERY_ACTIONS = frozenset({SELECT, READ, FUNCTION, RECURSIVE})
FIXTURE_ACTIONS = QUERY_ACTIONS | {
    CREATE_INDEX, CREATE_TABLE, CREATE_TEMP_INDEX, CREATE_TEMP_TABLE, CREATE_TEMP_TRIGGER,
    CREATE_TEMP_VIEW, CREATE_TRIGGER, CREATE_VIEW, DELETE, DROP_INDEX, DROP_TABLE,
    DROP_TEMP_INDEX, DROP_TEMP_TABLE, DROP_TEMP_TRIGGER, DROP_TEMP_VIEW, DROP_TRIGGER, DROP_VIEW,
    INSERT, TRANSACTION, UPDATE, ALTER_TABLE, REINDEX, ANALYZE, SAVEPOINT}
# Read-only introspection, and the foreign-key switch a fixture may set; nothing that writes a
# file, changes the schema's trust or the journal (journal_mode, writable_schema, temp_store...).
PRAGMAS = frozenset({"foreign_keys", "table_info", "table_xinfo", "foreign_key_list",
                     "index_list", "index_info", "index_xinfo"})
DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})

BUDGET_S = 5.0               # per script or query, unless the caller gives its own
MAX_BYTES = 256 << 20        # the database's pages, at most
MAX_LENGTH = 16 << 20        # one string or blob, at most
MAX_SCRIPT = 64 << 20        # a fixture script's characters, at most
MAX_ROWS = 10_000


class SqlInputError(ValueError):
    """Task SQL that cannot run under the guard: denied, too slow, too big, or invalid."""


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple]
    truncated: bool                      # more than max_rows rows
    tables: list[str] = field(default_factory=list)  # the database's tables the query read


class GuardedDatabase:
    """One in-memory database: load a fixture script (or a file's bytes), then run queries.

        with GuardedDatabase(fixture) as db:
            result = db.query(reference_query)
    """

    def __init__(self, script: str | None = None, *, image: bytes | None = None,
                 budget_s: float = BUDGET_S, max_bytes: int = MAX_BYTES):
        self.budget_s = budget_s
        self._mode, self._read, self._deadline = "setup", set(), 0.0
        # cached_statements=0: a statement prepared (and authorized) in one mode is never reused
        # in another; the authorizer runs at prepare time only.
        self._db = sqlite3.connect(":memory:", cached_statements=0, isolation_level=None)
        try:
            self._setup(image, max_bytes)
            if script is not None:
                self.execute_script(script)
        except BaseException:
            self._db.close()
            raise

    def _setup(self, image: bytes | None, max_bytes: int) -> None:
        db = self._db
        db.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        db.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_LENGTH)
        if hasattr(db, "enable_load_extension"):  # absent where Python was built without it
            db.enable_load_extension(False)
        if image is not None:
            if len(image) > max_bytes:
                raise SqlInputError(f"the database is {len(image)} bytes; at most {max_bytes} are read")
            if image[:16] == b"SQLite format 3\x00" and image[18:20] == b"\x02\x02":
                image = image[:18] + b"\x01\x01" + image[20:]  # WAL header: read it as rollback
            if not hasattr(db, "deserialize"):
                raise SqlInputError("this Python's sqlite3 cannot load a database file into "
                                    "memory (it needs Python 3.11 and SQLite 3.36 or newer)")
            try:
                db.deserialize(image)
            except sqlite3.Error as e:
                raise SqlInputError(f"not a SQLite database: {e}") from None
        db.set_authorizer(self._authorize)
        db.set_progress_handler(self._past_deadline, 1000)
        pages = max(1, max_bytes // 4096)
        for pragma in ("temp_store = MEMORY", "trusted_schema = OFF",
                       f"main.max_page_count = {pages}", f"temp.max_page_count = {pages}"):
            self._run(f"PRAGMA {pragma}")

    def _authorize(self, action, arg1, arg2, db_name, source) -> int:
        allowed = True
        if action == FUNCTION:
            allowed = str(arg2).lower() not in DENIED_FUNCTIONS
        elif action == PRAGMA:
            allowed = self._mode == "setup" or str(arg1).lower() in PRAGMAS and self._mode != "query"
        elif self._mode == "query":
            allowed = action in QUERY_ACTIONS
        else:
            allowed = action in FIXTURE_ACTIONS
        if allowed and action == READ and self._mode == "query" and arg1:
            self._read.add(str(arg1))
        return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY

    def _past_deadline(self) -> int:
        return int(time.monotonic() > self._deadline)

    def _run(self, sql: str, params=()) -> list[tuple]:
        """Our own statements (introspection, settings): all rows."""
        mode, self._mode = self._mode, "setup"
        self._deadline = time.monotonic() + self.budget_s
        try:
            return self._db.execute(sql, params).fetchall()
        except (sqlite3.Error, sqlite3.Warning, OverflowError, MemoryError) as e:
            raise self._input_error(e) from None
        finally:
            self._mode = mode

    def _input_error(self, e: BaseException) -> SqlInputError:
        if isinstance(e, sqlite3.OperationalError) and str(e) == "interrupted":
            return SqlInputError(f"took longer than {self.budget_s:g} s (stopped)")
        if isinstance(e, sqlite3.DatabaseError) and str(e) in ("not authorized",
                                                               "authorization denied"):
            return SqlInputError("not authorized (ATTACH, VACUUM, file access, extensions and "
                                 "most PRAGMAs are refused; a query may only read)")
        return SqlInputError(f"{type(e).__name__}: {e}")

    def execute_script(self, script: str) -> None:
        """Run a fixture script: it may create, fill and change tables, views, indexes, triggers."""
        if not isinstance(script, str) or len(script) > MAX_SCRIPT:
            raise SqlInputError(f"a fixture must be an SQL script of at most {MAX_SCRIPT} characters")
        self._mode, self._deadline = "fixture", time.monotonic() + self.budget_s
        self._db.set_authorizer(self._authorize)  # expires anything prepared in another mode
        try:
            self._db.executescript(script)
        except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as e:
            raise self._input_error(e) from None
        finally:
            self._mode = "setup"
            if self._db.in_transaction:  # a script that began a transaction and never ended it
                self._db.commit()

    def query(self, sql: str, max_rows: int = MAX_ROWS, budget_s: float | None = None) -> QueryResult:
        """Run one read-only statement: its columns, at most `max_rows` rows, the tables it read."""
        self._run("PRAGMA query_only = ON")
        self._mode, self._read = "query", set()
        self._deadline = time.monotonic() + (self.budget_s if budget_s is None else budget_s)
        self._db.set_authorizer(self._authorize)
        try:
            cursor = self._db.execute(sql)
            rows = cursor.fetchmany(max_rows + 1)
            columns = [d[0] for d in cursor.description or ()]
        except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as e:
            raise self._input_error(e) from None
        finally:
            self._mode = "setup"
            self._run("PRAGMA query_only = OFF")
        tables = {name.lower() for name in self.table_names()}
        return QueryResult(columns, [tuple(r) for r in rows[:max_rows]], len(rows) > max_rows,
                           sorted(t for t in self._read if t.lower() in tables))

    def table_names(self) -> list[str]:
        """The database's own tables (not views, not SQLite's sqlite_* tables), in creation order."""
        return [name for (name,) in self._run(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
            "ESCAPE '\\' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY rowid")]

    def schema(self) -> list[tuple[str, str, str]]:
        """(type, name, sql) of every schema object with SQL text, in creation order."""
        return self._run("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                         "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid")

    def pragma(self, name: str, table: str) -> list[tuple]:
        """A read-only introspection PRAGMA (table_xinfo, foreign_key_list, ...) of `table`."""
        if name not in PRAGMAS:
            raise ValueError(f"PRAGMA {name} is not an introspection pragma")
        return self._run(f"PRAGMA {name}({quote_name(table)})")

    def rows(self, table: str, columns: list[str]) -> list[tuple]:
        """Every row of `table`'s `columns`, in the table's own order."""
        return self._run(f"SELECT {', '.join(map(quote_name, columns))} FROM {quote_name(table)}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "GuardedDatabase":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
