"""`flywheel report --run-dir D --html report.html`: one self-contained page of a run's curves.

Every plot is drawn with matplotlib from the run's tables alone (DuckDB over the committed
iterations' partitions, so a run that is being written can be reported too) and embedded as a
base64 PNG, so the page can be mailed, attached to a ticket or opened from a bucket without the
run directory beside it:

- held-out greedy pass@1 per domain across iterations (the all-domain figure in black)
- the training attempts' mean reward and pass rate per domain
- the share of attempts in zero-variance groups (no learning signal) and of filtered attempts
- errors by kind per iteration
- the trainer's loss, KL and grad norm (and its other statistics) where the run recorded them
- the stage timeline: each iteration's rollout and update on one clock (reports/timeline.py)
- for runs with episodes, an episode's time in sampling, queue wait and tools, and the engine's
  batch sizes, per iteration: is the sandbox or the model the bottleneck (reports/episode_timing.py)
- for render domains, the best and worst renders of the last iteration beside their targets
  (reports/render_panel.py)
- per domain, where the run recorded `watch/*` metrics (loop/domain_watch.py): success,
  entropy, kept share and share of the update, and the warnings (a domain diverging from the
  others, an entropy collapse)

and, where the run (or a `flywheel eval --out` dir) holds an `evaluations` table:

- greedy pass@1 beside pass@k per domain over the evaluated iterations (checkpoints)
- the inference-time scaling table of the latest evaluated iteration: pass@1, pass@k, greedy,
  maj@N, best-of-N by visible tests and by self-verification, the oracle (an HTML table)
- the ablation grid: greedy pass@1 and oracle best-of-N per evaluation name, when several
  evaluations (ablation cells) share an iteration

A dir with evaluations but no committed iteration (an eval output) gets the evaluation sections
alone. (`flywheel report --html` itself still asks for a run.json; `render_report` does not.)
"""

from __future__ import annotations

import base64
import datetime as dt
import html

import matplotlib
from matplotlib.figure import Figure

from flywheel.settings.layout import RunLayout
from flywheel.reports.episode_timing import episode_timing_plot
from flywheel.reports.eval_html import ablation_plot, eval_curves_plot, scaling_section
from flywheel.reports.plots import ALL, Plot, draw_lines, png, text
from flywheel.reports.render_panel import render_panel_for_run
from flywheel.reports.review_section import review_section
from flywheel.reports.timeline import timeline_plot
from flywheel.reports.report import OTHERS, WATCH_CURVES, DomainWatch, domain_watch, evaluations
from flywheel.schemas import TABLES, read_table, storage

TRAINER_STATS = ("loss", "pg_loss", "kl", "approx_kl", "grad_norm", "entropy", "clip_frac")
ERROR_COLORS = {"environment": "tab:orange", "model": "tab:red", "input": "tab:purple"}


def _series(tables: "CommittedTables", sql: str, params: list | None = None
            ) -> dict[str, list[tuple[int, float]]]:
    """{label: [(iteration, value), ...]} from rows (iteration, label, value)."""
    out: dict[str, list[tuple[int, float]]] = {}
    for iteration, label, value in tables.rows(sql, params):
        if value is not None:
            out.setdefault(label, []).append((int(iteration), float(value)))
    return out


def _metric(tables: "CommittedTables", name: str) -> dict[str, list[tuple[int, float]]]:
    return _series(tables, "SELECT iteration, domain, value FROM metrics WHERE name = ? "
                            "ORDER BY iteration, domain", [name])


def heldout_plot(tables: "CommittedTables") -> Plot:
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    draw_lines(fig.subplots(), _metric(tables, "heldout_pass@1"), "held-out pass@1 (greedy)")
    return Plot("Held-out pass@1", "Greedy pass@1 on each domain's held-out tasks, evaluated with "
                "the policy that sampled the iteration; black: all domains.", png(fig))


def train_plot(tables: "CommittedTables") -> Plot:
    fig = Figure(figsize=(12, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    draw_lines(left, _metric(tables, "train_mean_reward"), "mean reward (training attempts)",
                unit_range=False)
    draw_lines(right, _metric(tables, "train_pass_rate"), "pass rate (training attempts)")
    return Plot("Training reward and pass rate", "The sampled training attempts of each "
                "iteration: mean raw reward and share that passed, per domain.", png(fig))


def signal_plot(tables: "CommittedTables") -> Plot:
    fig = Figure(figsize=(12, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    draw_lines(left, _metric(tables, "zero_variance_frac"), "zero-variance share")
    share = "avg(CASE WHEN filtered THEN 1.0 ELSE 0.0 END)"
    filtered = _series(tables, f"SELECT iteration, domain, {share} FROM trajectories GROUP BY ALL "
                                f"UNION ALL SELECT iteration, '{ALL}', {share} FROM trajectories "
                                "GROUP BY ALL ORDER BY 1, 2")
    draw_lines(right, filtered, "filtered share")
    return Plot("Learning signal", "Left: share of training attempts in groups whose rewards are "
                "all equal (no advantage, nothing learned). Right: share of trajectories flagged "
                "`filtered` (kept out of the loss), from the trajectories table.", png(fig))


def errors_plot(tables: "CommittedTables") -> Plot:
    rows = tables.rows("SELECT iteration, kind, count(*) FROM errors GROUP BY ALL ORDER BY 1, 2")
    iterations = sorted(set(tables.iterations) | {int(r[0]) for r in rows})
    fig = Figure(figsize=(8, 3.6))
    ax = fig.subplots()
    bottom = {i: 0 for i in iterations}
    for kind in sorted({r[1] for r in rows}):
        counts = {int(i): n for i, k, n in rows if k == kind}
        heights = [counts.get(i, 0) for i in iterations]
        ax.bar(iterations, heights, bottom=[bottom[i] for i in iterations], label=kind,
               color=ERROR_COLORS.get(kind))
        for i, h in zip(iterations, heights):
            bottom[i] += h
    ax.set_xlabel("iteration")
    ax.set_ylabel("error rows")
    ax.grid(alpha=0.3, axis="y")
    if rows:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no errors recorded", ha="center", va="center", transform=ax.transAxes)
    if iterations:
        ax.set_xticks(iterations)
    total = sum(r[2] for r in rows)
    return Plot("Errors by kind", f"{total} error rows: `environment` (infrastructure, retried), "
                "`model` (the response's fault, scored 0), `input` (bad tasks).", png(fig))


def trainer_plot(tables: "CommittedTables") -> Plot | None:
    series = {name: _metric(tables, f"train/{name}").get(ALL, []) for name in TRAINER_STATS}
    series = {name: points for name, points in series.items() if points}
    if not series:
        return None
    fig = Figure(figsize=(11, 2.8 * ((len(series) + 2) // 3)))
    axes = fig.subplots((len(series) + 2) // 3, 3, squeeze=False).flatten()
    for ax, (name, points) in zip(axes, series.items()):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=4)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in axes[len(series):]:
        ax.set_visible(False)
    fig.tight_layout()
    return Plot("Trainer", "The policy update of each iteration (metrics `train/*`): " +
                ", ".join(series) + ".", png(fig))


# -- domains -----------------------------------------------------------------------------------

WATCH_AXES = {"watch/success": ("success (training pass rate)", True),
              "watch/entropy": ("entropy of sampled tokens (nats/token)", False),
              "watch/kept_frac": ("kept share (not filtered)", True),
              "watch/update_share": ("share of the update", True)}


def domains_plot(watch: DomainWatch) -> Plot:
    """The four `watch/*` curves, a panel each, a line per shown domain (OTHERS in grey, all
    domains in black) and one legend for the four."""
    fig = Figure(figsize=(12, 7.5), layout="constrained")
    colors = {d: matplotlib.colormaps["tab20"](i % 20) for i, d in enumerate(watch.shown)}
    colors.update({OTHERS: "grey", ALL: "black"})
    handles = {}
    for ax, name in zip(fig.subplots(2, 2).flatten(), WATCH_CURVES):
        ylabel, unit_range = WATCH_AXES[name]
        for label, points in watch.curves[name].items():
            line, = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                            markersize=3, color=colors[label],
                            linewidth=2.5 if label == ALL else 1.5,
                            linestyle="--" if label == OTHERS else "-")
            handles.setdefault("all" if label == ALL else label, line)
        ax.set_title(ylabel, fontsize=10)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if unit_range:
            ax.set_ylim(-0.02, 1.02)
    fig.legend(list(handles.values()), list(handles), fontsize=8, loc="outside right upper",
               frameon=False)
    caption = ("Per domain and iteration, from the trajectories: share of training attempts that "
               "passed; mean -logprob of the sampled tokens (an estimate of the policy's entropy); "
               "share of attempts kept for the loss; share of the update (|advantage| x trained "
               "tokens of the kept attempts). Black: all domains.")
    if watch.others:
        caption += (f" The {len(watch.shown)} domains with the most attempts are drawn alone; the "
                    f"other {len(watch.others)} as one dashed line ({OTHERS}: their mean weighted "
                    "by attempts, their sum for the update share).")
    return Plot("Domains", caption, png(fig))


def warnings_html(watch: DomainWatch) -> str:
    """The section's list of the recorded warnings, or a line saying there are none."""
    if not watch.warnings:
        return "<p>No warnings: no domain diverged from the others and no entropy collapsed.</p>"
    items = "\n".join(
        f'<li>iteration {w["iteration"]}, {text("all domains" if w["domain"] == ALL else w["domain"])}'
        f': <strong>{text(w["kind"])}</strong>, {text(w["text"])}</li>' for w in watch.warnings)
    return (f"<h3>Warnings</h3><p>{len(watch.warnings)} recorded (metrics "
            f'<code>watch/warning_*</code>; run.log has each one\'s figures).</p>\n'
            f'<ul class="domain-warnings">\n{items}\n</ul>')


class CommittedTables:
    """The tables of a run's committed iterations, as DuckDB views of the columns the plots use.

    Only committed partitions are read, so a report can be drawn while a run writes the next
    iteration (a Parquet file being written is not yet readable)."""

    COLUMNS = {"metrics": ["iteration", "domain", "name", "value", "run_id"],
               "errors": ["iteration", "kind"],
               "trajectories": ["iteration", "domain", "filtered"]}

    def __init__(self, run_dir: str):
        import duckdb
        import pyarrow as pa
        layout = RunLayout(run_dir)
        self.iterations = layout.committed_iterations()
        self.con = duckdb.connect()
        for table, columns in self.COLUMNS.items():
            parts = [read_table(layout.table_dir(table, k), table, columns=columns)
                     for k in self.iterations]
            empty = pa.schema([TABLES[table].field(c) for c in columns]).empty_table()
            self.con.register(table, pa.concat_tables(parts) if parts else empty)

    def rows(self, sql: str, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql, params or []).fetchall()


def _plot_section(p: Plot, after: str = "") -> str:
    return (f'<section><h2>{html.escape(p.title)}</h2><p>{html.escape(p.caption)}</p>'
            f'<img alt="{html.escape(p.title)}" src="data:image/png;base64,'
            f'{base64.b64encode(p.png).decode()}">{after}</section>')


def render_report(run_dir: str) -> tuple[str, list[Plot]]:
    """(the page's HTML, its plots), from the run's committed iterations and its evaluations."""
    tables = CommittedTables(run_dir)
    evals, notes = evaluations(run_dir)
    plots: list[Plot] = []
    if tables.iterations or not evals:  # an eval output dir has no training to draw
        plots = [heldout_plot(tables), train_plot(tables), signal_plot(tables), errors_plot(tables)]
        trainer = trainer_plot(tables)
        if trainer:
            plots.append(trainer)
        timeline = timeline_plot(run_dir)
        if timeline:
            plots.append(timeline)
        episodes = episode_timing_plot(run_dir)
        if episodes:
            plots.append(episodes)
    sections = [_plot_section(p) for p in plots]
    watch = domain_watch(tables.rows("SELECT iteration, domain, name, value FROM metrics "
                                     "WHERE name LIKE 'watch/%' ORDER BY 1, 2, 3"))
    if watch:
        plots.append(domains_plot(watch))
        sections.append(_plot_section(plots[-1], warnings_html(watch)))
    if evals:
        curves, grid = eval_curves_plot(evals), ablation_plot(evals)
        if curves:
            plots.append(curves)
            sections.append(_plot_section(curves))
        sections.append(scaling_section(evals))
        if grid:
            plots.append(grid)
            sections.append(_plot_section(grid))
    sections += [p for p in [render_panel_for_run(run_dir)] if p]  # render domains' pictures
    sections += [p for p in [review_section(run_dir)] if p]  # people's labels
    sections += [f'<p class="note">{html.escape(n)}</p>' for n in notes]
    ids = tables.rows("SELECT DISTINCT run_id FROM metrics")
    title = f"Flywheel run {', '.join(r[0] for r in ids) or run_dir}"
    where = f"<code>{html.escape(run_dir)}</code>"
    if tables.iterations or not evals:
        intro = f"{len(tables.iterations)} committed iterations in {where}"
    else:
        intro = f"{len(evals)} evaluations and no training iterations in {where}"
    section_html = "\n".join(sections)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1150px; margin: 2em auto; color: #222; }}
section {{ margin-bottom: 2.5em; }} img {{ max-width: 100%; }} p {{ color: #555; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }}
td:nth-child(-n+2), th:nth-child(-n+2) {{ text-align: left; }}
.domain-warnings strong {{ color: #b00; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{intro}; drawn
from their tables on
{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.</p>
{section_html}
</body></html>
"""
    return page, plots


def write_report(run_dir: str, path: str) -> list[Plot]:
    """Write the page to `path` (a local path or a URI such as gs://, whole or not at all);
    returns its plots. Through schemas/storage, not Beam's FileSystems: the command does not
    import Beam (about 2 s) to write one file."""
    page, plots = render_report(run_dir)
    storage.write_whole(path, page.encode())
    return plots
