"""Summaries of a run for people: the held-out pass@1 table and the per-iteration progress line."""

from __future__ import annotations

from rich.table import Table

from flywheel.reports.sql import query


TITLES = {"heldout_pass@1": "held-out pass@1 (greedy)",
          "train_pass_rate": "sampled pass rate of the training attempts",
          "zero_variance_frac": "share of attempts in groups without learning signal"}


def metric_table(run_dir: str, metric: str = "heldout_pass@1") -> Table:
    """One metric (default: held-out greedy pass@1) per domain (columns) for every iteration (rows)."""
    _, rows = query(run_dir, "SELECT iteration, domain, value FROM metrics "
                             "WHERE name = ? ORDER BY iteration, domain", [metric])
    domains = sorted({d for _, d, _ in rows if d != "*"}) + ["*"]
    by_iteration: dict[int, dict[str, float]] = {}
    for iteration, domain, value in rows:
        by_iteration.setdefault(iteration, {})[domain] = value
    table = Table(title=TITLES.get(metric, metric))
    table.add_column("iteration", justify="right")
    for d in domains:
        table.add_column("all" if d == "*" else d, justify="right")
    for iteration, values in sorted(by_iteration.items()):
        table.add_row(str(iteration), *(f"{values[d]:.3f}" if d in values else "-" for d in domains))
    return table
