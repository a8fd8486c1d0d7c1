"""Sandbox side of the `sql_result` verifier; runs as `python -I harness.py` with the plan on stdin.

Loads each fixture into a fresh in-memory SQLite database, switches it to read-only, and runs the
response's query there (one statement; ATTACH, PRAGMA and writes denied; a time budget). Prints one
report line (the plan's `marker`, then JSON), with each fixture's columns and rows. The query is SQL, not
Python, so it has no way to write to stdout: the report is the harness's own. Standard library only.
"""

import json
import sqlite3
import sys
import time

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33}  # 33: RECURSIVE (CTE)


def _cell(value):
    if isinstance(value, float) and value != value:
        return {"float": "nan"}
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return {"float": repr(value)}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def run(fixture, query, max_rows, budget_s):
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(fixture)
        db.execute("PRAGMA query_only = ON")
        db.set_authorizer(lambda action, *args: sqlite3.SQLITE_OK if action in _ALLOWED
                          else sqlite3.SQLITE_DENY)
        deadline = time.monotonic() + budget_s
        db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        cursor = db.execute(query)
        rows = cursor.fetchmany(max_rows + 1)
        return {"columns": [d[0] for d in cursor.description or []],
                "rows": [[_cell(v) for v in row] for row in rows[:max_rows]],
                "truncated": len(rows) > max_rows, "error": None}
    except (sqlite3.Error, sqlite3.Warning, ValueError, OverflowError, MemoryError) as e:
        return {"columns": [], "rows": [], "truncated": False, "error": f"{type(e).__name__}: {e}"}
    finally:
        db.close()


def main():
    plan = json.loads(sys.stdin.read())
    budget = plan["budget_s"] / max(1, len(plan["fixtures"]))
    results = [run(f, plan["query"], plan["max_rows"], budget) for f in plan["fixtures"]]
    sys.stdout.write(plan["marker"] + json.dumps({"results": results}) + "\n")


if __name__ == "__main__":
    main()
