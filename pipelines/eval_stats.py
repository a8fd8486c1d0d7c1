"""Evaluation statistics for `flywheel eval`: pass@k, greedy pass@1, majority vote, best-of-n.

    from flywheel.pipelines.eval_stats import summarize, render_table
    rich.print(render_table(summarize(rows, ks=(1, 4, 16))))

Rows are evaluation attempts (dicts with `domain`, `task_id`, `sample_index`, `verdict`, `greedy`
and, where a domain has them, `answer_key`, `visible_score`, `self_score`). A row is correct when
its verdict is "pass". Rows with verdict "error" are environment failures, never model failures
(DESIGN.md): they are left out of every n and every mean and only counted, as `errors`.

`summarize` returns one dict per domain (sorted) and one for all domains (`domain` = "all",
every task weighted equally). Keys, all means over tasks as fractions in [0, 1]:

- `tasks`: distinct tasks seen; `errors`: error rows (greedy or sampled);
- `n`: sampled scored attempts per task, the minimum over tasks; `n_max`: the maximum (n != n_max
  says the tasks differ: pass@k then uses each task's own count, the selectors its first n);
- `pass@{k}` for each k <= n: the unbiased estimator of Chen et al. 2021 per task;
- `greedy_pass@1`: over tasks with a scored greedy row (None if none);
- `maj@{n}`: the most frequent `answer_key` among the task's first n samples (ties: the key seen
  first), judged by its earliest row;
- `best_of_{n}_visible` / `best_of_{n}_self`: the sample with the highest `visible_score` /
  `self_score` (ties: the lowest sample_index);
- `oracle_best_of_{n}`: any of the first n samples correct.

A selector picks one sample per task; samples without its signal rank below those with it, and a
task with no signal at all falls back to its first sample, so every column of a summary is over
the same tasks (a math-and-code "all" row votes where it can). A selector's value is None where
no considered row carries its signal. Tasks with no scored sampled row (only greedy or error
rows) are left out of the sampled metrics.

`to_metrics_rows` turns summaries into rows of the `metrics` table, named `eval/<key>`, with the
all-domains row as domain "*" (transforms/metrics.py). `pass_at_k_sql` is the same pass@k in DuckDB.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rich.table import Table

ALL = "all"
METRICS_ALL = "*"          # the metrics table's name for all domains (transforms/metrics.py)
NAME_PREFIX = "eval/"

Row = Mapping[str, object]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k samples drawn from n (c of them correct) is correct.

    1 - C(n-c, k) / C(n, k), as a product so that large n neither overflows nor loses precision.
    """
    if min(n, c, k) < 0 or k < 1 or k > n or c > n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass
class _Task:
    """One task's scored rows: sampled ones by sample_index, its greedy row, and its error count."""
    sampled: list[Row] = field(default_factory=list)
    greedy: Row | None = None
    errors: int = 0


def _correct(row: Row) -> bool:
    return row["verdict"] == "pass"


def _group(rows: Iterable[Row]) -> dict[tuple[str, str], _Task]:
    """(domain, task_id) -> _Task; the lowest-index greedy row stands for the task's greedy try."""
    tasks: dict[tuple[str, str], _Task] = defaultdict(_Task)
    for row in sorted(rows, key=lambda r: r["sample_index"]):
        if row["verdict"] not in ("pass", "fail", "error"):
            raise ValueError(f"unknown verdict {row['verdict']!r} in task {row['task_id']!r}")
        task = tasks[(row["domain"], row["task_id"])]
        if row["verdict"] == "error":
            task.errors += 1
        elif not row.get("greedy"):
            task.sampled.append(row)
        elif task.greedy is None:
            task.greedy = row
    return tasks


def _mean(values: Iterable[float]) -> float | None:
    values = [float(v) for v in values]
    return sum(values) / len(values) if values else None


def _majority(samples: Sequence[Row]) -> Row:
    """The earliest row of the most frequent answer key; dict order makes ties go to the key seen first."""
    votes: dict[object, list[Row]] = {}
    for row in samples:
        if row.get("answer_key") is not None:
            votes.setdefault(row["answer_key"], []).append(row)
    return max(votes.values(), key=len)[0] if votes else samples[0]


def _best_by(score: str) -> Callable[[Sequence[Row]], Row]:
    """A selector of the row with the highest `score`; max() keeps the first, i.e. lowest index."""
    def select(samples: Sequence[Row]) -> Row:
        scored = [r for r in samples if r.get(score) is not None]
        return max(scored, key=lambda r: r[score]) if scored else samples[0]
    return select


def _selected(samples: list[Sequence[Row]], signal: str, select) -> float | None:
    if not any(r.get(signal) is not None for s in samples for r in s):
        return None
    return _mean(_correct(select(s)) for s in samples)


def _summary(domain: str, tasks: list[_Task], ks: Sequence[int]) -> dict:
    scored = [t for t in tasks if t.sampled]
    sizes = [len(t.sampled) for t in scored]
    n = min(sizes, default=0)
    out = {"domain": domain, "tasks": len(tasks), "n": n, "n_max": max(sizes, default=0),
           "errors": sum(t.errors for t in tasks)}
    for k in sorted(set(ks)):
        if k <= n:
            out[f"pass@{k}"] = _mean(pass_at_k(len(t.sampled), sum(map(_correct, t.sampled)), k)
                                     for t in scored)
    out["greedy_pass@1"] = _mean(_correct(t.greedy) for t in tasks if t.greedy is not None)
    if n:
        first = [t.sampled[:n] for t in scored]
        out[f"maj@{n}"] = _selected(first, "answer_key", _majority)
        out[f"best_of_{n}_visible"] = _selected(first, "visible_score", _best_by("visible_score"))
        out[f"best_of_{n}_self"] = _selected(first, "self_score", _best_by("self_score"))
        out[f"oracle_best_of_{n}"] = _mean(any(map(_correct, s)) for s in first)
    return out


def summarize(rows: Iterable[Row], ks: Sequence[int] = (1, 4, 16)) -> list[dict]:
    """One summary per domain (sorted), then the all-domains one; keys in the module docstring."""
    if any(k < 1 for k in ks):
        raise ValueError(f"every k must be at least 1, got {list(ks)}")
    tasks = _group(rows)
    if not tasks:
        return []
    by_domain: dict[str, list[_Task]] = defaultdict(list)
    for (domain, _), task in tasks.items():
        by_domain[domain].append(task)
    return ([_summary(d, by_domain[d], ks) for d in sorted(by_domain)]
            + [_summary(ALL, list(tasks.values()), ks)])


_COLUMN_ORDER = (r"pass@(\d+)", r"greedy_pass@1()", r"maj@(\d+)", r"best_of_(\d+)_visible",
                 r"best_of_(\d+)_self", r"oracle_best_of_(\d+)")
_COUNTS = ("domain", "tasks", "n", "n_max", "errors")


def _column_rank(key: str) -> tuple[int, int]:
    for rank, pattern in enumerate(_COLUMN_ORDER):
        m = re.fullmatch(pattern, key)
        if m:
            return rank, int(m.group(1) or 0)
    return len(_COLUMN_ORDER), 0


def _metric_keys(summaries: Sequence[Mapping]) -> list[str]:
    keys = {k for s in summaries for k in s if k not in _COUNTS}
    return sorted(keys, key=lambda k: (_column_rank(k), k))


def render_table(summaries: Sequence[Mapping]) -> Table:
    """A rich table: one row per domain, one column per metric, "n/a" where a metric has no value."""
    keys = _metric_keys(summaries)
    table = Table(title="evaluation")
    for name in ("domain", "tasks", "n", "errors", *keys):
        table.add_column(name, justify="left" if name == "domain" else "right")
    for s in summaries:
        n = str(s["n"]) if s["n"] == s["n_max"] else f"{s['n']}..{s['n_max']}"
        values = [s.get(k) for k in keys]
        table.add_row(s["domain"], str(s["tasks"]), n, str(s["errors"]),
                      *("n/a" if v is None else f"{v:.3f}" for v in values))
    return table


def to_metrics_rows(summaries: Sequence[Mapping], run_id: str, iteration: int,
                    policy_version: int | None = None) -> list[dict]:
    """`metrics` table rows, `eval/<key>` per numeric value (None values are left out).

    `policy_version` defaults to `iteration`, the driver's numbering (loop/driver.py).
    """
    created_at = dt.datetime.now(dt.timezone.utc)
    version = iteration if policy_version is None else policy_version
    return [{"run_id": run_id, "iteration": iteration,
             "domain": METRICS_ALL if s["domain"] == ALL else s["domain"],
             "name": NAME_PREFIX + key, "value": float(value), "policy_version": version,
             "created_at": created_at}
            for s in summaries for key, value in s.items() if key != "domain" and value is not None]


def pass_at_k_sql(table: str, k: int, sampled: str = "NOT greedy") -> str:
    """DuckDB SQL: per-domain pass@k (columns domain, tasks, "pass@k") plus an "all" row.

    `table` is a table, a view or a parenthesized subquery holding one evaluation (filter an
    iteration first); `sampled` is the predicate of the sampled rows: the default reads a boolean
    `greedy` column; over raw trajectories use e.g. "sampling_temperature > 0". Error rows are out
    of n as in `summarize`; tasks with fewer than k scored samples are left out. C(n-c, k) / C(n, k)
    goes through lgamma so that it needs no product over rows.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return f"""
WITH per_task AS (
    SELECT domain, task_id,
           count(*) FILTER (WHERE verdict <> 'error') AS n,
           count(*) FILTER (WHERE verdict = 'pass') AS c
    FROM {table}
    WHERE {sampled}
    GROUP BY domain, task_id
    HAVING count(*) FILTER (WHERE verdict <> 'error') >= {k}
), scored AS (
    SELECT domain,
           CASE WHEN n - c < {k} THEN 1.0
                ELSE 1.0 - exp(lgamma(n - c + 1) - lgamma(greatest(n - c - {k}, 0) + 1)
                               + lgamma(n - {k} + 1) - lgamma(n + 1)) END AS p
    FROM per_task
)
SELECT coalesce(domain, '{ALL}') AS domain, count(*) AS tasks, avg(p) AS "pass@{k}"
FROM scored
GROUP BY GROUPING SETS ((domain), ())
ORDER BY grouping(domain), domain
"""
