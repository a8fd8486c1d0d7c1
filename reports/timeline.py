"""Where a run's time went: each committed iteration's rollout and update as bars on one clock.

The commit markers (iterations/K/_COMMITTED) hold each stage's wall-clock window (`stages`:
rollout, train; loop/driver.py). A synchronous run draws them end to end; an overlapped run
(loop/overlap.py) draws iteration k+1's rollout under iteration k's update. The figures
beside the picture: the run's span, each lane's busy share of it, and the time both ran at once.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from flywheel.settings.layout import RunLayout
from flywheel.reports.plots import Plot, png

LANES = ("rollout", "train")
COLORS = {"rollout": "tab:blue", "train": "tab:orange"}


def stage_windows(run_dir: str) -> dict[int, dict[str, tuple[float, float]]]:
    """{iteration: {stage: (start, end)}} of the committed iterations whose markers hold them
    (markers written before stages were recorded, or not by the driver, are left out)."""
    layout = RunLayout(run_dir)
    out = {}
    for k in layout.committed_iterations():
        try:
            stages = layout.read_json(layout.commit_marker(k)).get("stages") or {}
        except (ValueError, OSError, AttributeError):  # an empty or foreign marker: no stages
            continue
        windows = {s: (float(w[0]), float(w[1])) for s, w in stages.items() if s in LANES}
        if windows:
            out[k] = windows
    return out


def _union(windows: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _length(windows) -> float:
    return sum(end - start for start, end in windows)


def _intersection(a, b) -> float:
    return sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def timeline_figures(windows: dict[int, dict[str, tuple[float, float]]]) -> dict:
    """span_s (first start to last end), busy_s and busy_share per lane, both_s (time the
    rollout and the update ran at once), iterations_per_hour."""
    lanes = {lane: _union([w[lane] for w in windows.values() if lane in w]) for lane in LANES}
    points = [t for w in windows.values() for pair in w.values() for t in pair]
    span = max(points) - min(points) if points else 0.0
    figures = {"span_s": span, "iterations": len(windows),
               "iterations_per_hour": 3600 * len(windows) / span if span else 0.0,
               "both_s": _intersection(lanes["rollout"], lanes["train"])}
    for lane, merged in lanes.items():
        figures[f"{lane}_busy_s"] = _length(merged)
        figures[f"{lane}_busy_share"] = _length(merged) / span if span else 0.0
    return figures


def timeline_plot(run_dir: str) -> Plot | None:
    """The stage timeline, or None when no committed marker records stages."""
    windows = stage_windows(run_dir)
    if not windows:
        return None
    origin = min(t for w in windows.values() for pair in w.values() for t in pair)
    fig = Figure(figsize=(9, 2.4), layout="constrained")
    ax = fig.subplots()
    for k, stages in sorted(windows.items()):
        for row, lane in enumerate(LANES):
            if lane in stages:
                start, end = stages[lane]
                ax.barh(row, end - start, left=start - origin, color=COLORS[lane],
                        edgecolor="white", height=0.6)
                ax.text(start - origin + (end - start) / 2, row, str(k), ha="center",
                        va="center", fontsize=7, color="white")
    ax.set_yticks(range(len(LANES)), ["rollout", "update"])
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first committed iteration began")
    ax.grid(alpha=0.3, axis="x")
    f = timeline_figures(windows)
    caption = (f"Each committed iteration's rollout and update (numbered by iteration) on one "
               f"clock: {f['iterations']} iterations in {f['span_s']:.0f} s "
               f"({f['iterations_per_hour']:.1f} per hour); rollout busy "
               f"{100 * f['rollout_busy_share']:.0f}%, update busy "
               f"{100 * f['train_busy_share']:.0f}%, both at once {f['both_s']:.0f} s "
               "(an overlapped run, [overlap] max_staleness > 0, rolls out k+1 while k trains).")
    return Plot("Stage timeline", caption, png(fig))
