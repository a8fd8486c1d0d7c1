"""`flywheel sql`: DuckDB over a run's Parquet tables, each exposed as a view named after it,
and the steering views over them: `task_history` (one row per task: visits, attempts, passes,
its last pass rate, its recurring failure pattern) and `error_set` (failed attempts grouped by
pattern), the SQL the samplers read (steering/history.py)."""

from __future__ import annotations

import duckdb

from flywheel.settings.layout import RunLayout
from flywheel.schemas import TABLES
from flywheel.steering.history import ERROR_SET_SQL, TASK_HISTORY_SQL, view_sql

VIEWS = {"task_history": TASK_HISTORY_SQL, "error_set": ERROR_SET_SQL}


def connect(run_dir: str) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection where `trajectories`, `errors` and `metrics` are views of the run."""
    con, layout = duckdb.connect(), RunLayout(run_dir)
    for table in TABLES:
        con.register(f"_{table}_dataset", layout.table_dataset(table))
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM _{table}_dataset")
    for name, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {view_sql(sql)}")
    return con


def query(run_dir: str, sql: str, parameters: list | None = None):
    """(column names, rows) of `sql` run against the run's tables."""
    con = connect(run_dir)
    try:
        cursor = con.execute(sql, parameters) if parameters else con.execute(sql)
        columns = [d[0] for d in cursor.description] if cursor.description else []
        return columns, cursor.fetchall()
    finally:
        con.close()
