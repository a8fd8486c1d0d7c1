"""Two runs' tables compared with wall-clock time and the run's name left out: the rule behind
"the same command and seed give the same tables" (bench/same_tables.py, resume and config tests)."""

from __future__ import annotations

import json

# Columns that hold wall-clock time or the run's name, at any depth (`turns[].duration_ms` too).
VOLATILE = frozenset({"started_at", "finished_at", "sandbox_wall_ms", "sandbox_cpu_ms", "duration_ms",
                      "created_at", "run_id", "wall_ms", "cpu_ms"})


def without_volatile(value):
    """`value` (a row, a list, a nested struct) with every VOLATILE key left out, at any depth."""
    if isinstance(value, dict):
        return {k: without_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(v) for v in value]
    return value


def comparable_rows(rows) -> list[str]:
    """Rows as sorted canonical JSON with the volatile columns out: equal lists, equal tables."""
    return sorted(json.dumps(without_volatile(r), sort_keys=True, default=str) for r in rows)
