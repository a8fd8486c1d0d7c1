"""The `sql_result` verifier: compare the query's result sets with the reference query's.

The sandbox harness (domains/harnesses/sql.py) ran the response's query on every fixture; the
expected rows come from running the task's reference query here, on the same fixture scripts, in
a trusted in-memory SQLite. Rows are compared as multisets unless the task is ordered; numbers
compare by value (1 == 1.0) to 6 decimals; column names do not matter, column order does.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from functools import lru_cache
from typing import Any

from flywheel.domains.sql_query import REPORT_MARKER, is_ordered
from flywheel.verifiers import Verdict, register_verifier
from flywheel.verifiers.scoring import harness_report, score_cases



@lru_cache(maxsize=1024)
def expected_result(fixture: str, query: str) -> tuple[int, list[tuple]]:
    """(column count, rows) of the reference query on one fixture."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(fixture)
        cursor = db.execute(query)
        return len(cursor.description or ()), [tuple(row) for row in cursor.fetchall()]
    finally:
        db.close()


def _cell(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return round(float(value), 6) + 0.0  # + 0.0: -0.0 == 0.0 and both sort alike
    return repr(value)  # encoded bytes / non-finite floats: compared as given


def same_rows(got: list, want: list[tuple], ordered: bool, width: int) -> bool:
    """The rows match, and every row has the reference's `width` columns."""
    got = [tuple(_cell(v) for v in row) for row in got]
    want = [tuple(_cell(v) for v in row) for row in want]
    if any(len(row) != width for row in got):
        return False
    return got == want if ordered else Counter(map(repr, got)) == Counter(map(repr, want))


@register_verifier("sql_result", "1")
def sql_result(task: dict, response: str, execution: Any = None) -> Verdict:
    fixtures = [task["fixture"], *task.get("hidden_fixtures", [])]
    names = ["visible_0"] + [f"hidden_{i}" for i in range(len(fixtures) - 1)]
    wants = [expected_result(f, task["reference_query"]) for f in fixtures]
    report, problem, flags = harness_report(execution, REPORT_MARKER)
    if report is None:
        return score_cases({n: False for n in names}, set(names[1:]), flags, problem)
    got = report.get("results") or []
    if len(got) != len(fixtures):
        raise ValueError(f"the harness reported {len(got)} results for {len(fixtures)} fixtures")
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
