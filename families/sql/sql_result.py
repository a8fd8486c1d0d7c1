"""The `sql_result` verifier: compare the query's result sets with the reference query's.

The sandbox harness (families/sql/harnesses/sql.py) ran the response's query on every fixture (the
visible one, then the hidden ones: the task's own or variants derived from its fixture); the
expected rows come from running the task's reference query here, on the same fixture scripts,
under the guard (in memory, no files, a deadline). Rows are compared as multisets unless the task
is ordered; numbers compare by value (1 == 1.0) to 6 decimals; column names do not matter, column
order does. A query that reads no table of the database (`SELECT 2`, literal rows, a CTE of
literals) has not computed its answer from the data: flagged `reads_no_table`, it earns 0.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from flywheel.families.sql.sql_query import REPORT_MARKER, fixtures_of, is_ordered
from flywheel.families.sql.sql_variants import result_key
from flywheel.families.sql.sqlite_guard import MAX_ROWS, GuardedDatabase
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.scoring import harness_report, score_cases


@lru_cache(maxsize=1024)
def expected_result(fixture: str, query: str) -> tuple[int, list[tuple]]:
    """(column count, rows) of the reference query on one fixture."""
    with GuardedDatabase(fixture) as db:
        result = db.query(query, MAX_ROWS)
    if result.truncated:
        raise ValueError(f"the reference query returns more than {MAX_ROWS} rows")
    return len(result.columns), result.rows


def same_rows(got: list, want: list[tuple], ordered: bool, width: int) -> bool:
    """The rows match, and every row has the reference's `width` columns."""
    if any(len(row) != width for row in got):
        return False
    return result_key(width, got, ordered) == result_key(width, want, ordered)


@register_verifier("sql_result", "2")
def sql_result(task: dict, response: str, execution: Any = None) -> Verdict:
    fixtures = fixtures_of(task)
    names = ["visible_0"] + [f"hidden_{i}" for i in range(len(fixtures) - 1)]
    wants = [expected_result(f, task["reference_query"]) for f in fixtures]
    report, problem, flags = harness_report(execution, REPORT_MARKER)
    if report is None:
        return score_cases({n: False for n in names}, set(names[1:]), flags, problem)
    got = report.get("results") or []
    if len(got) != len(fixtures):
        raise ValueError(f"the harness reported {len(got)} results for {len(fixtures)} fixtures")
    if any(r.get("error") is None and not r.get("tables") for r in got):
        flags = [*flags, "reads_no_table"]  # the answer was not computed from the database
    ordered = is_ordered(task)
    # The column count is checked apart from the rows, so that on a fixture whose reference
    # result is empty, a query that returns nothing of the wrong shape (`SELECT 1 WHERE 0`) fails.
    results = {n: r.get("error") is None and not r.get("truncated")
               and len(r.get("columns") or ()) == width and same_rows(r["rows"], rows, ordered, width)
               for n, r, (width, rows) in zip(names, got, wants)}
    # Nor does a fixture whose reference result is empty count on its own: returning nothing
    # there is right only for a query that returns the right rows where there are some to return.
    if not any(rows for _, rows in wants):
        raise ValueError("the reference query returns no rows on any fixture: nothing to score")
    solved = any(results[n] for n, (_, rows) in zip(names, wants) if rows)
    results = {n: ok and (solved or bool(rows)) for n, ok, (_, rows) in zip(names, results.values(), wants)}
    errors = [f"{n}: {r['error']}" for n, r in zip(names, got) if r.get("error")]
    return score_cases(results, set(names[1:]), flags, "; ".join(errors[:2]))
