"""The report's evaluation sections (reports/html.py draws the page): pass@1 beside pass@k over
training, the inference-time scaling table, and the ablation grid's bars, all from the
`evaluations` summaries (reports/report.py reads them)."""

from __future__ import annotations

import html

from matplotlib.figure import Figure

from flywheel.reports.plots import Plot, png
from flywheel.reports.report import Evaluation

EVAL_ALL = "all"  # eval_stats.summarize's all-domains row


def _domains(evals: list[Evaluation]) -> list[str]:
    """Every domain the evaluations hold, sorted, with "all" last (as summarize orders them)."""
    names = {s["domain"] for e in evals for s in e.summaries}
    return sorted(names - {EVAL_ALL}) + [EVAL_ALL]


def _fmt(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _pass_at(summary: dict) -> list[int]:
    return sorted(int(key[5:]) for key in summary if key.startswith("pass@"))


def eval_curves_plot(evals: list[Evaluation]) -> Plot | None:
    """Greedy pass@1 and pass@k over the evaluated iterations, a panel per domain; of the
    evaluation name evaluated at the most iterations (ties: the name sorted first). None when no
    evaluation was made at two iterations or more: one point is no curve (the tables show it)."""
    if len({e.iteration for e in evals}) < 2:
        return None
    counts: dict[str, int] = {}
    for e in evals:
        counts[e.name] = counts.get(e.name, 0) + 1
    name = min(counts, key=lambda n: (-counts[n], n))
    chosen = [e for e in evals if e.name == name]
    domains = _domains(chosen)
    cols = min(3, len(domains))
    rows = -(-len(domains) // cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).flatten()
    ks = sorted({k for e in chosen for s in e.summaries for k in _pass_at(s)})
    colors = {k: f"C{i}" for i, k in enumerate(ks)}
    for ax, domain in zip(axes, domains):
        lines = {"greedy pass@1": ("greedy_pass@1", {"color": "black", "linewidth": 2.5})}
        lines.update({f"pass@{k}": (f"pass@{k}", {"color": colors[k], "linewidth": 1.5})
                      for k in ks})
        for label, (key, style) in lines.items():
            points = [(e.iteration, e.summary(domain).get(key)) for e in chosen
                      if e.summary(domain) is not None]
            points = [(i, v) for i, v in points if v is not None]
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                        markersize=4, label=label, **style)
        ax.set_title("all domains" if domain == EVAL_ALL else domain, fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in axes[len(domains):]:
        ax.set_visible(False)
    axes[0].legend(fontsize=8, loc="lower right")
    others = sorted(set(counts) - {name})
    caption = (f"Evaluation `{name}` at iterations {', '.join(str(e.iteration) for e in chosen)}: "
               "greedy pass@1 (black) beside pass@k of its samples, per domain; the gap between "
               "pass@1 and pass@k is what sampling more could still find.")
    if others:
        caption += f" Other evaluations ({', '.join(others)}) are in the tables below."
    return Plot("pass@1 and pass@k over training", caption, png(fig))


SCALING_COLUMNS = ("evaluation", "domain", "tasks", "n", "errors", "pass@1", "k", "pass@k",
                   "greedy pass@1", "maj@N", "best-of-N visible", "best-of-N self",
                   "oracle best-of-N")


def scaling_cells(summary: dict) -> list[str]:
    """One summary's cells of the scaling table, after its evaluation's name."""
    n, k = summary["n"], max(_pass_at(summary), default=None)
    n_text = str(n) if n == summary["n_max"] else f"{n}..{summary['n_max']}"
    return [summary["domain"], str(summary["tasks"]), n_text, str(summary["errors"]),
            _fmt(summary.get("pass@1")), "n/a" if k is None else str(k),
            _fmt(summary.get(f"pass@{k}")), _fmt(summary.get("greedy_pass@1")),
            _fmt(summary.get(f"maj@{n}")), _fmt(summary.get(f"best_of_{n}_visible")),
            _fmt(summary.get(f"best_of_{n}_self")), _fmt(summary.get(f"oracle_best_of_{n}"))]


def scaling_section(evals: list[Evaluation]) -> str:
    """The inference-time scaling table of the latest evaluated iteration, as HTML."""
    latest = max(e.iteration for e in evals)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in SCALING_COLUMNS)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in [e.name, *scaling_cells(s)]) + "</tr>"
        for e in evals if e.iteration == latest for s in e.summaries)
    return (f'<section><h2>Inference-time scaling</h2><p>Iteration {latest}, per evaluation and '
            "domain, means over tasks: pass@1 and pass@k of the N samples (k: the largest "
            "summarized), the greedy answer, the majority answer of N (maj@N), the best of N "
            "picked by the visible tests and by the policy's own judgment, and the oracle best of "
            "N (any sample correct: the ceiling of every selector). n/a: no row carries the "
            "selector's signal.</p>\n"
            f'<table class="eval-scaling">\n<tr>{head}</tr>\n{body}\n</table></section>')


ABLATION_METRICS = (("greedy pass@1", lambda s: s.get("greedy_pass@1")),
                    ("oracle best-of-N", lambda s: s.get(f"oracle_best_of_{s['n']}")))


def ablation_plot(evals: list[Evaluation]) -> Plot | None:
    """Grouped bars per domain, a bar per evaluation name, at the latest iteration that holds
    several evaluations (None if none does)."""
    names: dict[int, list[Evaluation]] = {}
    for e in evals:
        names.setdefault(e.iteration, []).append(e)
    shared = [i for i, group in names.items() if len(group) > 1]
    if not shared:
        return None
    iteration = max(shared)
    cells = sorted(names[iteration], key=lambda e: e.name)
    domains = _domains(cells)
    fig = Figure(figsize=(max(8, 1.1 * len(domains) * len(cells)), 4.2), layout="constrained")
    axes = fig.subplots(1, len(ABLATION_METRICS))
    width = 0.8 / len(cells)
    for ax, (label, value) in zip(axes, ABLATION_METRICS):
        for j, cell in enumerate(cells):
            for x, domain in enumerate(domains):
                summary = cell.summary(domain)
                v = None if summary is None else value(summary)
                pos = x - 0.4 + width * (j + 0.5)
                if v is None:
                    ax.text(pos, 0.01, "n/a", ha="center", fontsize=7, rotation=90)
                else:
                    ax.bar(pos, v, width, color=f"C{j}", label=cell.name if x == 0 else None)
        ax.set_xticks(range(len(domains)),
                      ["all" if d == EVAL_ALL else d for d in domains])
        ax.set_ylim(0, 1.02)
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3, axis="y")
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=8, loc="outside lower center",
               ncols=min(3, len(cells)), frameon=False)
    return Plot("Ablation grid", f"Iteration {iteration}: greedy pass@1 and the oracle best of N "
                f"for each of its {len(cells)} evaluations (ablation cells, named by their "
                "settings), per domain.", png(fig))
