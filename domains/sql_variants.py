"""Hidden variants of a SQL task's fixture, derived when the task gives none.

A task whose only database is the one its prompt shows pays for the visible answer however it was
produced: the expected rows written as literals, or `SELECT 3 FROM orders LIMIT 1` hard-coding a
count. A variant is a perturbed copy of the fixture on which the reference query gives another
result; the same query is scored there too (as a hidden case), so an answer that was not computed
from the data fails. Each candidate copy is one of:

- `drop`: about a third of each table's rows removed (at least one row kept);
- `grow`: about a third of each table's rows copied as new rows (fresh primary keys, fresh values
  where a column's values were all distinct, the rest as they were): a query that hard-codes
  which rows to return (`WHERE id IN (1, 3)`) misses the new ones;
- `shift`: each numeric non-key column moved by a strictly increasing map (integers + k, reals
  x f with f > 1): values change, their order and ties stay, so ORDER BY ... LIMIT stays
  well-defined where it was;
- `mix`: all three.

Rows are inserted in a shuffled order. Key columns (primary and foreign keys, the columns foreign
keys point at, names ending in `id`) keep their values so that joins still join (only a grown
row's primary key is new); text is kept (but a grown row's distinct text), so filters on names
and dates still select. A candidate is kept when the schema accepts it and the
reference query runs on it, within its row cap, with a result other than on the visible fixture;
non-empty results first, at most VARIANTS. Candidates come from a seed hashed from the fixture
and the reference query: the same task gets the same variants in every process (the sandbox
request and the verifier each derive them). Everything runs under the guard, in memory.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from functools import lru_cache

from flywheel.domains.sql_dump import Snapshot, TableData, script, snapshot
from flywheel.domains.sqlite_guard import MAX_ROWS, GuardedDatabase, QueryResult, SqlInputError

VARIANTS = 3        # kept per task
CANDIDATES = 12     # tried per task, at most
KINDS = ("drop", "grow", "shift", "mix")


def cell_key(value):
    """A cell as the verifier compares it: numbers by value to 6 decimals (1 == 1.0)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return round(float(value), 6) + 0.0  # + 0.0: -0.0 == 0.0 and both sort alike
    return repr(value)  # bytes, encoded cells, non-finite floats: compared as given


def result_key(width: int, rows, ordered: bool) -> tuple:
    """What two results must share to be the same answer: column count, then rows (as a list
    when order matters, else as a multiset)."""
    rows = [repr(tuple(cell_key(v) for v in row)) for row in rows]
    return width, tuple(rows) if ordered else tuple(sorted(Counter(rows).items()))


def _shifted(value, shift: int, factor: float):
    if isinstance(value, int):
        return value + shift
    if isinstance(value, float):
        return value * factor
    return value


def _fresh(value, used: set, rng: random.Random):
    """A value of `value`'s type that no row in the column has (`used`, updated)."""
    numbers = [v for v in used if isinstance(v, (int, float))]
    if isinstance(value, int):
        value = int(max(numbers, default=value)) + rng.randint(1, 3)
    elif isinstance(value, float):
        value = max(numbers, default=value) + round(rng.uniform(0.5, 9.5), 2)
    elif isinstance(value, str):
        n = 2
        while f"{value} {n}" in used:
            n += 1
        value = f"{value} {n}"
    used.add(value)
    return value


def _grown(table: TableData, rows: list[tuple], rng: random.Random) -> list[tuple]:
    """`rows` and copies of about a third of them (at least one). A copy gets fresh values in
    its primary key and in every other column whose values are all distinct (a name, an amount),
    so no new ties appear; foreign keys and repeated values (a city) are copied, so the new rows
    join and filter like the old ones."""
    if not rows:
        return rows
    columns = [c.lower() for c in table.columns]
    used = [{row[i] for row in rows} for i in range(len(columns))]
    fresh = [c in table.primary or (c not in table.foreign and len(rows) > 1
                                    and len(used[i]) == len(rows)) for i, c in enumerate(columns)]
    copies = [row for row in rows if rng.random() < 1 / 3] or [rng.choice(rows)]
    return rows + [tuple(_fresh(v, used[i], rng) if fresh[i] else v for i, v in enumerate(row))
                   for row in copies]


def _perturb(table: TableData, kind: str, rng: random.Random) -> TableData:
    rows = list(table.rows)
    if kind in ("drop", "mix") and len(rows) > 1:
        kept = [row for row in rows if rng.random() >= 1 / 3]
        rows = kept or [rng.choice(rows)]
    if kind in ("grow", "mix"):
        rows = _grown(table, rows, rng)
    if kind in ("shift", "mix"):
        maps = [None if c.lower() in table.keys else (rng.randint(1, 3), rng.uniform(1.1, 1.6))
                for c in table.columns]
        rows = [tuple(v if m is None else _shifted(v, *m) for v, m in zip(row, maps)) for row in rows]
    rng.shuffle(rows)
    return TableData(table.name, table.columns, tuple(rows), table.primary, table.foreign)


def _result(fixture: str, query: str) -> QueryResult:
    with GuardedDatabase(fixture) as db:
        return db.query(query, MAX_ROWS)


@lru_cache(maxsize=256)
def derived_variants(fixture: str, reference_query: str, ordered: bool) -> tuple[str, ...]:
    """Up to VARIANTS fixture scripts on which `reference_query` answers otherwise than on
    `fixture`. A fixture or reference query the guard refuses raises SqlInputError."""
    with GuardedDatabase(fixture) as db:
        snap: Snapshot = snapshot(db)
        visible = db.query(reference_query, MAX_ROWS)
    shown = result_key(len(visible.columns), visible.rows, ordered)
    seed = hashlib.sha256(f"{fixture}\0{reference_query}".encode()).hexdigest()
    full, empty = [], []
    for i in range(CANDIDATES):
        rng = random.Random(f"{seed}:{i}")
        kind = KINDS[i % len(KINDS)]
        candidate = script(snap, tuple(_perturb(t, kind, rng) for t in snap.tables))
        try:
            result = _result(candidate, reference_query)
        except SqlInputError:  # a CHECK or UNIQUE constraint the perturbation broke, say
            continue
        key = result_key(len(result.columns), result.rows, ordered)
        if result.truncated or key == shown:
            continue
        (full if result.rows else empty).append(candidate)
        if len(full) >= VARIANTS:
            break
    return tuple((full + empty)[:VARIANTS])
