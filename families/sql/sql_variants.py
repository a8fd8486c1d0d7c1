"""Hidden variants of a SQL task's fixture, derived when the task gives none.

A task whose only database is the one its prompt shows pays for the visible answer however it was
produced: the expected rows written as literals, or `SELECT 3 FROM orders LIMIT 1` hard-coding a
count. A variant is a perturbed copy of the fixture on which the reference query gives another
result; the same query is scored there too (as a hidden case), so an answer that was not computed
from the data fails. Each candidate copy is one of:

- `drop`: 20-60% of each table's rows removed (at least one kept), but never a row that
  another table's foreign key refers to: every reference still resolves;
- `grow`: 20-90% of each table's rows copied as new rows (fresh values in key columns and
  wherever a column's values were all distinct, the rest as they were): a query that hard-codes
  which rows to return (`WHERE id IN (1, 3)`) misses the new ones;
- `shift`: each numeric non-key column moved by a strictly increasing map (integers + k, reals
  x f with f > 1): values change, their order and ties stay, so ORDER BY ... LIMIT stays
  well-defined where it was;
- `mix`: all three;
- `skew`: one row of each table copied 2 to 6 times (as in `grow`): an arg-max ("the city with
  the most orders") that drops and copies across the board leave alone may change.

Rows are inserted in a shuffled order. Key columns (primary and foreign keys, the columns foreign
keys point at, names ending in `id`) keep their values so that joins still join (only a grown
row's primary key is new); text is kept (but a grown row's distinct text), so filters on names
and dates still select. A candidate is kept when the schema accepts it and the
reference query runs on it, within its row cap, with a result other than on the visible fixture
and one that does not hang on how ties of its ORDER BY are broken (a perturbation can tie two
counts: "the city with most customers" then has two right answers); non-empty results first, at
most VARIANTS. Candidates come from a seed hashed from the fixture
and the reference query: the same task gets the same variants in every process (the sandbox
request and the verifier each derive them). Everything runs under the guard, in memory.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from functools import lru_cache

from flywheel.families.sql.sql_dump import Snapshot, TableData, script, snapshot
from flywheel.families.sql.sqlite_guard import MAX_ROWS, GuardedDatabase, QueryResult, SqlInputError

VARIANTS = 3        # kept per task
CANDIDATES = 25     # tried per task, at most (5 of each kind)
KINDS = ("drop", "grow", "shift", "mix", "skew")


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


def _unique_columns(table: TableData) -> set[int]:
    """Positions of the columns that act as keys here: the primary key, and every column whose
    values are all distinct (in a table of two rows or more)."""
    rows = table.rows
    return {i for i, c in enumerate(table.columns) if c.lower() in table.primary
            or (len(rows) > 1 and len({row[i] for row in rows}) == len(rows))}


def _referenced(tables: tuple[TableData, ...]) -> dict[str, set]:
    """Per table, the values that other tables' foreign-key columns hold: a row whose key has
    one of them is some other row's parent, and is never dropped (an orphan would make queries
    that are equivalent only where every reference resolves, JOIN vs IN, answer differently)."""
    held = {t.name: {row[i] for row in t.rows for i, c in enumerate(t.columns) if c.lower() in t.foreign}
            for t in tables}
    return {t.name: set().union(*(v for name, v in held.items() if name != t.name)) for t in tables}


def _dropped(table: TableData, referenced: set, rng: random.Random) -> list[tuple]:
    """`table`'s rows less some of those no other row refers to (one row at least)."""
    keys = _unique_columns(table)
    rate = rng.uniform(0.2, 0.6)
    kept = [row for row in table.rows if any(row[i] in referenced for i in keys) or rng.random() >= rate]
    return kept or [rng.choice(table.rows)]


def _grown(table: TableData, rows: list[tuple], rng: random.Random, skew: bool = False) -> list[tuple]:
    """`rows` and copies of some of them (at least one; `skew`: one row, 2 to 6 times, so that
    a group that was not the largest may become it). A copy gets fresh values in
    its key columns (the primary key, and any column whose values were all distinct: a name, an
    amount), so no key repeats and no new ties appear; foreign keys and repeated values (a city)
    are copied, so the new rows join and filter like the old ones."""
    if not rows:
        return rows
    fresh = _unique_columns(table)
    used = [{row[i] for row in rows} for i in range(len(table.columns))]
    if skew:
        copies = [rng.choice(rows)] * rng.randint(2, 6)
    else:
        rate = rng.uniform(0.2, 0.9)
        copies = [row for row in rows if rng.random() < rate] or [rng.choice(rows)]
    return rows + [tuple(_fresh(v, used[i], rng) if i in fresh else v for i, v in enumerate(row))
                   for row in copies]


def _perturb(table: TableData, kind: str, referenced: set, rng: random.Random) -> TableData:
    rows = list(table.rows)
    if kind in ("drop", "mix") and len(rows) > 1:
        rows = _dropped(table, referenced, rng)
    if kind in ("grow", "mix", "skew"):
        rows = _grown(table, rows, rng, skew=kind == "skew")
    if kind in ("shift", "mix"):
        maps = [None if c.lower() in table.keys else (rng.randint(1, 3), rng.uniform(1.1, 1.6))
                for c in table.columns]
        rows = [tuple(v if m is None else _shifted(v, *m) for v, m in zip(row, maps)) for row in rows]
    rng.shuffle(rows)
    return TableData(table.name, table.columns, tuple(rows), table.primary, table.foreign)


_ORDER_BY = re.compile(r"\border\s+by\s+(?P<keys>.+?)(?P<limit>\s+limit\s+\d+(?:\s*(?:offset|,)\s*\d+)?)?"
                       r"\s*$", re.I | re.S)


def _depends_on_ties(db: GuardedDatabase, query: str, result: QueryResult, ordered: bool) -> bool:
    """Whether the query's top-level ORDER BY leaves rows tied whose order (or, under a LIMIT,
    whose choice) changes the result: then the query has no one right answer on this database,
    and a correct query that breaks the tie otherwise would fail. Found by breaking the tie both
    ways, every output column ascending then descending (`ORDER BY keys, 1 ASC, 2 ASC ...`)."""
    found = _ORDER_BY.search(query)
    if not found or found["keys"].count("(") != found["keys"].count(")"):
        return False  # no top-level ORDER BY at the end: nothing to tie
    head, limit = query[:found.start()], found["limit"] or ""
    probes = []
    for direction in ("ASC", "DESC"):
        breakers = ", ".join(f"{i} {direction}" for i in range(1, len(result.columns) + 1))
        try:
            probe = db.query(f"{head}ORDER BY {found['keys']}, {breakers}{limit}", MAX_ROWS)
        except SqlInputError:
            return False  # not a shape the probe understands: keep the variant
        probes.append(result_key(len(probe.columns), probe.rows, ordered))
    return probes[0] != probes[1]


@lru_cache(maxsize=256)
def derived_variants(fixture: str, reference_query: str, ordered: bool) -> tuple[str, ...]:
    """Up to VARIANTS fixture scripts on which `reference_query` answers otherwise than on
    `fixture`. A fixture or reference query the guard refuses raises SqlInputError."""
    with GuardedDatabase(fixture) as db:
        snap: Snapshot = snapshot(db)
        visible = db.query(reference_query, MAX_ROWS)
    shown = result_key(len(visible.columns), visible.rows, ordered)
    referenced = _referenced(snap.tables)
    seed = hashlib.sha256(f"{fixture}\0{reference_query}".encode()).hexdigest()
    full, empty = [], []
    for i in range(CANDIDATES):
        rng = random.Random(f"{seed}:{i}")
        kind = KINDS[i % len(KINDS)]
        candidate = script(snap, tuple(_perturb(t, kind, referenced[t.name], rng) for t in snap.tables))
        try:
            with GuardedDatabase(candidate) as db:
                result = db.query(reference_query, MAX_ROWS)
                tied = _depends_on_ties(db, reference_query, result, ordered)
        except SqlInputError:  # a CHECK or UNIQUE constraint the perturbation broke, say
            continue
        key = result_key(len(result.columns), result.rows, ordered)
        if result.truncated or tied or key == shown:
            continue
        (full if result.rows else empty).append(candidate)
        if len(full) >= VARIANTS:
            break
    return tuple((full + empty)[:VARIANTS])
