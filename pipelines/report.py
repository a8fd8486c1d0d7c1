"""Summaries of a run for people: the held-out pass@1 table and the per-iteration progress line."""

from __future__ import annotations

from rich.table import Table

from flywheel.pipelines.sql import query


def pass_at_1_table(run_dir: str) -> Table:
    """Held-out greedy pass@1 per domain (columns) for every iteration (rows)."""
    _, rows = query(run_dir, "SELECT iteration, domain, value FROM metrics "
                             "WHERE name = 'heldout_pass@1' ORDER BY iteration, domain")
    domains = sorted({d for _, d, _ in rows if d != "*"}) + ["*"]
    by_iteration: dict[int, dict[str, float]] = {}
    for iteration, domain, value in rows:
        by_iteration.setdefault(iteration, {})[domain] = value
    table = Table(title="held-out pass@1 (greedy)")
    table.add_column("iteration", justify="right")
    for d in domains:
        table.add_column("all" if d == "*" else d, justify="right")
    for iteration, values in sorted(by_iteration.items()):
        table.add_row(str(iteration), *(f"{values[d]:.3f}" if d in values else "-" for d in domains))
    return table
