"""What earlier iterations say about each task, read with SQL from the run's tables.

The tables are the source of truth: `TASK_HISTORY_SQL` folds a run's `trajectories` (training
attempts) into one row per task, and `ERROR_SET_SQL` groups failed attempts by their pattern
(verdict, error kind and type, filter reason, how the response or episode ended). Both run in
DuckDB over the tables as views, locally or on `gs://` (pyarrow datasets), and `flywheel sql`
exposes them as the views `task_history` and `error_set`.

A task's *pattern* is the most frequent pattern of its failed attempts. A pattern *recurs* when
it is seen on at least `RECURRING_TASKS` distinct tasks of its domain; the tasks that failed in a
recurring pattern form the error set the samplers feed back.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from flywheel.schemas.read import table_dataset

RECURRING_TASKS = 2

FAILED_ATTEMPTS_SQL = """
SELECT t.domain, t.task_id, t.iteration, t.verdict,
       coalesce(e.kind, CASE WHEN t.verdict = 'error'
                             THEN replace(coalesce(t.filter_reason, 'unknown_error'), '_error', '')
                             ELSE 'model' END) AS error_kind,
       coalesce(e.error_type, '') AS error_type,
       coalesce(t.filter_reason, '') AS filter_reason,
       coalesce(t.finish_reason, '') AS finish_reason,
       coalesce(t.episode_end, '') AS episode_end
FROM trajectories t
LEFT JOIN (SELECT iteration, task_id, sample_index, any_value(kind) AS kind,
                  any_value(error_type) AS error_type
           FROM errors WHERE sample_index IS NOT NULL GROUP BY ALL) e
       USING (iteration, task_id, sample_index)
WHERE t.verdict IS DISTINCT FROM 'pass' AND t.iteration < $before
"""

PATTERN = ("verdict || '|' || error_kind || '|' || error_type || '|' || filter_reason || '|' || "
           "finish_reason || '|' || episode_end")

ERROR_SET_SQL = f"""
SELECT domain, verdict, error_kind, error_type, filter_reason, finish_reason, episode_end,
       {PATTERN} AS pattern,
       count(*) AS attempts, count(DISTINCT task_id) AS tasks,
       count(DISTINCT iteration) AS iterations, min(iteration) AS first_iteration,
       max(iteration) AS last_iteration,
       count(DISTINCT task_id) >= {RECURRING_TASKS} AS recurring
FROM ({FAILED_ATTEMPTS_SQL})
GROUP BY ALL
ORDER BY domain, attempts DESC, pattern
"""

TASK_HISTORY_SQL = f"""
WITH visits AS (
    SELECT domain, task_id, iteration, count(*) AS attempts,
           count(*) FILTER (WHERE verdict IS DISTINCT FROM 'error') AS scored,
           count(*) FILTER (WHERE verdict = 'pass') AS passes,
           count(*) FILTER (WHERE verdict = 'error'
                            AND filter_reason = 'environment_error') AS env_errors
    FROM trajectories WHERE iteration < $before GROUP BY ALL
), patterns AS (
    SELECT domain, task_id, {PATTERN} AS pattern, count(*) AS n
    FROM ({FAILED_ATTEMPTS_SQL}) GROUP BY ALL
), recurring AS (
    SELECT domain, pattern FROM patterns GROUP BY ALL
    HAVING count(DISTINCT task_id) >= {RECURRING_TASKS}
), task_pattern AS (
    SELECT p.domain, p.task_id, arg_max(p.pattern, p.n * 1000000 - hash(p.pattern) % 1000000) AS pattern
    FROM patterns p JOIN recurring r USING (domain, pattern) GROUP BY ALL
)
SELECT v.domain, v.task_id, count(*) AS visits, sum(v.attempts) AS attempts,
       sum(v.scored) AS scored, sum(v.passes) AS passes, max(v.iteration) AS last_iteration,
       arg_max(v.passes::DOUBLE / nullif(v.scored, 0), v.iteration) AS last_pass_rate,
       count(*) FILTER (WHERE v.scored > 0 AND v.passes = v.scored) AS solved_visits,
       count(*) FILTER (WHERE v.scored = 0 AND v.env_errors > 0) AS env_failed_visits,
       bool_or(v.scored = 0 AND v.env_errors > 0 AND v.iteration =
               (SELECT max(iteration) FROM visits w WHERE w.task_id = v.task_id
                AND w.domain = v.domain)) AS last_env_failed,
       any_value(tp.pattern) AS pattern
FROM visits v LEFT JOIN task_pattern tp USING (domain, task_id)
GROUP BY ALL
ORDER BY v.domain, v.task_id
"""


@dataclass(frozen=True)
class TaskStats:
    """One task's history: its visits (iterations it was attempted in), attempts, scored ones
    (not errors), passes; the last visit's pass rate (None: nothing scored); visits solved by
    every scored attempt; visits lost wholly to the environment, and whether the last one was;
    its recurring failure pattern (None: no recurring failure)."""
    domain: str
    task_id: str
    visits: int = 0
    attempts: int = 0
    scored: int = 0
    passes: int = 0
    last_iteration: int = -1
    last_pass_rate: float | None = None
    solved_visits: int = 0
    env_failed_visits: int = 0
    last_env_failed: bool = False
    pattern: str | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.scored if self.scored else None

    def to_tuple(self) -> tuple:
        return tuple(getattr(self, f) for f in self.__dataclass_fields__)


def view_sql(sql: str) -> str:
    """`sql` over every iteration, as a view can hold it (views take no parameters)."""
    return sql.replace("$before", str(2 ** 31 - 1))


def connect(tables_uri: str) -> duckdb.DuckDBPyConnection:
    """DuckDB with `trajectories` and `errors` of the run whose tables are under `tables_uri`."""
    con = duckdb.connect()
    for table in ("trajectories", "errors"):
        con.register(f"_{table}_dataset", table_dataset(f"{tables_uri.rstrip('/')}/{table}", table))
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM _{table}_dataset")
    return con


def task_history(tables_uri: str, before: int, domains: set[str] | None = None
                 ) -> dict[str, TaskStats]:
    """task_id -> TaskStats over the iterations before `before` (of `domains`, if given)."""
    con = connect(tables_uri)
    try:
        cursor = con.execute(TASK_HISTORY_SQL, {"before": before})
        names = [d[0] for d in cursor.description]
        out = {}
        for row in cursor.fetchall():
            values = dict(zip(names, row))
            if domains is not None and values["domain"] not in domains:
                continue
            values["last_env_failed"] = bool(values["last_env_failed"])
            out[values["task_id"]] = TaskStats(**{k: v for k, v in values.items()})
        return out
    finally:
        con.close()


def error_set(tables_uri: str, before: int = 1 << 30) -> list[dict]:
    """The error set's patterns as dicts (ERROR_SET_SQL's columns), most attempts first."""
    con = connect(tables_uri)
    try:
        cursor = con.execute(ERROR_SET_SQL, {"before": before})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]
    finally:
        con.close()
