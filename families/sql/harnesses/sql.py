"""Sandbox side of the `sql_result` verifier; runs as `python -I harness.py` with the plan on stdin.

Loads each fixture into a fresh in-memory SQLite database under the guard that the trusted side
uses too (sqlite_guard.py, shipped beside this file: no ATTACH, no file, a deadline, even under a
backend that isolates nothing), then runs the response's query there read-only (one statement;
ATTACH, PRAGMA and writes denied; a time budget). Prints one report line (the plan's `marker`,
then JSON), with each fixture's columns, rows and the database tables the query read. The query
is SQL, not Python, so it has no way to write to stdout: the report is the harness's own.
Standard library only.
"""

import json
import os
import sys

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # -I leaves our own folder out
from sqlite_guard import GuardedDatabase, SqlInputError  # noqa: E402


def _cell(value):
    if isinstance(value, float) and value != value:
        return {"float": "nan"}
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return {"float": repr(value)}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def run(fixture, query, max_rows, budget_s, load_budget_s):
    failed = {"columns": [], "rows": [], "truncated": False, "tables": []}
    try:
        db = GuardedDatabase(fixture, budget_s=load_budget_s)
    except SqlInputError as e:
        return {**failed, "error": f"fixture: {e}"}
    try:
        result = db.query(query, max_rows, budget_s)
        return {"columns": result.columns, "rows": [[_cell(v) for v in row] for row in result.rows],
                "truncated": result.truncated, "tables": result.tables, "error": None}
    except SqlInputError as e:
        return {**failed, "error": str(e)}
    except MemoryError:
        return {**failed, "error": "MemoryError"}
    finally:
        db.close()


def main():
    plan = json.loads(sys.stdin.read())
    budget = plan["budget_s"] / max(1, len(plan["fixtures"]))
    load_budget = plan.get("load_budget_s", 5.0)
    results = [run(f, plan["query"], plan["max_rows"], budget, load_budget) for f in plan["fixtures"]]
    sys.stdout.write(plan["marker"] + json.dumps({"results": results}) + "\n")


if __name__ == "__main__":
    main()
