"""Summaries of a run for people: the held-out pass@1 table, and its evaluations summarized
(`evaluations`: one `Evaluation` per iteration and evaluation name, for the HTML report)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
from rich.table import Table

from flywheel.pipelines.layout import RunLayout
from flywheel.reports.sql import query
from flywheel.schemas import read_table, resolve_uri


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


# -- evaluations (`flywheel eval`), summarized for the HTML report ---------------------------------

EVAL_COLUMNS = ["iteration", "evaluation", "domain", "task_id", "sample_index", "verdict", "greedy",
                "answer_key", "visible_score", "self_score"]
DEFAULT_KS = (1, 4, 16)  # `flywheel eval --k`'s default, for evaluations whose metrics say none
_RECORDED_PASS_AT = re.compile(r"eval/pass@(\d+)\[(.+)\]")  # pipelines/evaluation.py's names


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of the `evaluations` table: an (iteration, name) group, as eval_stats'
    `summarize` sums it up (one dict per domain, then "all")."""
    iteration: int
    name: str
    ks: tuple[int, ...]
    summaries: list[dict]

    def summary(self, domain: str) -> dict | None:
        return next((s for s in self.summaries if s["domain"] == domain), None)


def evaluations(run_dir: str) -> tuple[list[Evaluation], list[str]]:
    """(every evaluation of the run or eval output dir, sorted by iteration and name; notes).

    Each iteration folder is read on its own: one that cannot be read yet (an evaluation writing
    it) is left out and said in a note, so a report can be drawn while `flywheel eval` runs.
    The k of pass@k are those `flywheel eval` summarized (its `eval/pass@k[name]` metrics), else
    1, 4, 16 and n. Unlike the training plots, evaluations need no commit marker: an eval
    output dir has none."""
    from flywheel.pipelines.eval_stats import summarize
    layout, notes = RunLayout(run_dir), []
    groups: dict[tuple[int, str], list[dict]] = {}
    for iteration in _iterations(layout.table_dir("evaluations")):
        try:
            rows = read_table(layout.table_dir("evaluations", iteration), "evaluations",
                              columns=EVAL_COLUMNS).to_pylist()
        except (pa.ArrowInvalid, OSError) as e:
            notes.append(f"evaluations of iteration {iteration} left out: unreadable ({e})")
            continue
        for row in rows:
            groups.setdefault((iteration, row["evaluation"]), []).append(row)
    recorded = {k: _recorded_ks(layout, k, notes) for k in {k for k, _ in groups}}
    out = []
    for (iteration, name), rows in sorted(groups.items()):
        ks = recorded[iteration].get(name)
        if not ks:
            n = summarize(rows, ks=(1,))[-1]["n_max"]
            ks = sorted({k for k in (*DEFAULT_KS, n) if 1 <= k <= n})
        out.append(Evaluation(iteration, name, tuple(ks), summarize(rows, ks=ks)))
    return out, notes


def _iterations(table_dir: str) -> list[int]:
    """The K of the table's iteration=K folders (none if the table is absent)."""
    fs, path = resolve_uri(table_dir)
    found = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(int(info.base_name.split("=", 1)[1]) for info in found
                  if info.type == pafs.FileType.Directory and info.base_name.startswith("iteration="))


def _recorded_ks(layout: RunLayout, iteration: int, notes: list[str]) -> dict[str, list[int]]:
    """{evaluation name: the k its pass@k metrics were written for} at one iteration."""
    try:
        names = read_table(layout.table_dir("metrics", iteration), "metrics",
                           columns=["name"]).column("name").to_pylist()
    except (pa.ArrowInvalid, OSError) as e:
        notes.append(f"metrics of iteration {iteration} unreadable ({e}): k of pass@k assumed")
        return {}
    ks: dict[str, set[int]] = {}
    for name in names:
        m = _RECORDED_PASS_AT.fullmatch(name)
        if m:
            ks.setdefault(m.group(2), set()).add(int(m.group(1)))
    return {name: sorted(k) for name, k in ks.items()}
