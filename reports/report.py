"""Summaries of a run for people: the held-out pass@1 table, its evaluations summarized
(`evaluations`: one `Evaluation` per iteration and evaluation name) and its per-domain watch
(`domain_watch`: the `watch/*` metrics as curves and warnings), for the HTML report."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
from rich.table import Table

from flywheel.settings.layout import RunLayout
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


# -- the per-domain watch (loop/domain_watch.py), summarized for the HTML report ------------

WATCH_CURVES = ("watch/success", "watch/entropy", "watch/kept_frac", "watch/update_share")
OTHERS = "others"
WARNING = "watch/warning_"  # domain_watch.warning_rows's names
Points = list[tuple[int, float]]


@dataclass(frozen=True)
class DomainWatch:
    """A run's `watch/*` metrics as the report draws them: `curves[name][label]` are the points
    (iteration, value) of each shown domain, of OTHERS (the rest, pooled) and of '*'; `warnings`
    are the recorded ones, {iteration, domain, kind, text}, in order."""
    shown: list[str]
    others: list[str]
    curves: dict[str, dict[str, Points]]
    warnings: list[dict]


def domain_watch(rows: list[tuple], top: int = 12) -> DomainWatch | None:
    """From metrics rows (iteration, domain, name, value), the `watch/*` ones; None if none.

    The `top` domains by attempts (their `watch/attempt_share` summed over iterations; ties by
    name) are drawn each on its own; the rest as one OTHERS line, their mean weighted by their
    attempt share (for `watch/update_share`, their sum), so a run of 60 domains stays legible."""
    from flywheel.loop.domain_watch import ALL, KINDS
    values: dict[tuple[str, str], dict[int, float]] = {}
    for iteration, domain, name, value in rows:
        if name.startswith("watch/") and value is not None:
            values.setdefault((name, domain), {})[int(iteration)] = float(value)
    if not values:
        return None
    domains = sorted({d for _, d in values} - {ALL})
    attempts = {d: sum(values.get(("watch/attempt_share", d), {}).values()) for d in domains}
    ranked = sorted(domains, key=lambda d: (-attempts[d], d))
    shown, others = ranked[:top], ranked[top:]
    curves = {}
    for name in WATCH_CURVES:
        lines = {d: sorted(values[(name, d)].items()) for d in shown if (name, d) in values}
        pooled = _pooled(values, name, others)
        if pooled:
            lines[OTHERS] = pooled
        if name != "watch/update_share" and (name, ALL) in values:  # '*' is 1 there
            lines[ALL] = sorted(values[(name, ALL)].items())
        curves[name] = lines
    warnings = sorted(({"iteration": k, "domain": d, "kind": kind, "text": KINDS.get(kind, kind)}
                       for (name, d), points in values.items() if name.startswith(WARNING)
                       for kind in [name[len(WARNING):]] for k, v in points.items() if v > 0),
                      key=lambda w: (w["iteration"], w["domain"], w["kind"]))
    return DomainWatch(shown, others, curves, warnings)


def _pooled(values: dict, name: str, domains: list[str]) -> Points:
    """`domains` as one line of `name`: per iteration, their attempt-share-weighted mean (the sum,
    for the update share)."""
    by_iteration: dict[int, list[tuple[float, float]]] = {}
    for d in domains:
        shares = values.get(("watch/attempt_share", d), {})
        for k, v in values.get((name, d), {}).items():
            by_iteration.setdefault(k, []).append((v, shares.get(k, 1.0)))
    out = []
    for k, pairs in sorted(by_iteration.items()):
        if name == "watch/update_share":
            out.append((k, sum(v for v, _ in pairs)))
        elif sum(w for _, w in pairs) > 0:
            out.append((k, sum(v * w for v, w in pairs) / sum(w for _, w in pairs)))
    return out
