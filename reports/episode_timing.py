"""Where episodes spend their time: the model, the wait for the engine, or the sandbox.

The episode stage (transforms/episode_loop.py) counts, per episode, the time its loop spent
asking for actions (`episode_generation_ms_total`, the wait for the engine's batch included),
the part of that spent queued (`episode_queue_wait_ms_total`) and the time its tool calls took
(`episode_tool_ms_total`), with `episodes_run`; the worker's batching engine counts its calls and
their rows (`engine_batches`, `engine_batch_rows`). Each committed iteration's marker
(iterations/K/_COMMITTED, the run log's `counters`) holds their sums, and the sandbox's uid
tallies (`sandbox_uid_leases`, `sandbox_uid_wait_ms`) beside them.

The panel draws, per iteration, an episode's mean time split into sampling (generation less its
queue wait), queue wait and tools, and the engine's mean batch size; its caption says which of the
sandbox or the model took most of the last iteration's episode time. A run without episodes (no
`episodes_run`) draws nothing.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from flywheel.settings.layout import RunLayout
from flywheel.reports.plots import Plot, png

PARTS = ("sampling", "queue wait", "tools")
COLORS = {"sampling": "tab:blue", "queue wait": "tab:gray", "tools": "tab:orange"}


def episode_timing(run_dir: str) -> dict[int, dict[str, float]]:
    """{iteration: figures} of the committed iterations whose run log counted episodes: episodes,
    per episode mean seconds of `sampling`, `queue wait` and `tools`, `batch_size` (mean rows per
    engine call, 0 when none was counted), `batches`, `uid_leases` and `uid_wait_s`."""
    layout = RunLayout(run_dir)
    out = {}
    for k in layout.committed_iterations():
        try:
            counters = layout.read_json(layout.commit_marker(k)).get("counters") or {}
        except (ValueError, OSError, AttributeError):  # an empty or foreign marker
            continue
        episodes = counters.get("episodes_run", 0)
        if not episodes:
            continue
        generation = counters.get("episode_generation_ms_total", 0) / episodes / 1000
        queue = counters.get("episode_queue_wait_ms_total", 0) / episodes / 1000
        batches = counters.get("engine_batches", 0)
        out[k] = {"episodes": episodes, "sampling": max(0.0, generation - queue),
                  "queue wait": queue, "tools": counters.get("episode_tool_ms_total", 0) / episodes / 1000,
                  "batches": batches,
                  "batch_size": counters.get("engine_batch_rows", 0) / batches if batches else 0.0,
                  "uid_leases": counters.get("sandbox_uid_leases", 0),
                  "uid_wait_s": counters.get("sandbox_uid_wait_ms", 0) / 1000}
    return out


def bottleneck(figures: dict[str, float]) -> str:
    """Which part took most of an episode's time, in words, with its share."""
    total = sum(figures[p] for p in PARTS)
    if not total:
        return "no time counted"
    tools = figures["tools"] / total
    if tools >= 0.5:
        return f"the sandbox: tool calls took {100 * tools:.0f}% of an episode's time"
    queue = figures["queue wait"] / total
    return (f"the model: asking for actions took {100 * (1 - tools):.0f}% of an episode's time "
            f"({100 * queue:.0f}% waiting in the engine's queue)")


def episode_timing_plot(run_dir: str) -> Plot | None:
    """The panel, or None when no committed iteration counted episodes."""
    timing = episode_timing(run_dir)
    if not timing:
        return None
    iterations = sorted(timing)
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    bottom = [0.0] * len(iterations)
    for part in PARTS:
        heights = [timing[k][part] for k in iterations]
        left.bar(iterations, heights, bottom=bottom, label=part, color=COLORS[part])
        bottom = [b + h for b, h in zip(bottom, heights)]
    left.set_ylabel("seconds per episode (mean)")
    left.set_xlabel("iteration")
    left.legend(fontsize=8)
    right.bar(iterations, [timing[k]["batch_size"] for k in iterations], color="tab:green")
    right.set_ylabel("rows per engine call (mean)")
    right.set_xlabel("iteration")
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="y")
        ax.set_xticks(iterations)
    last = timing[iterations[-1]]
    caption = (f"Episodes' time per iteration (the episode stage's counters in the run log). Left: "
               "an episode's mean seconds asking the engine for actions (sampling, and the queue "
               "wait before its batch) and running its tool calls in the sandbox. Right: the "
               f"engine's mean batch (rows per call). Iteration {iterations[-1]}: "
               f"{last['episodes']:.0f} episodes, {last['sampling']:.2f} s sampling, "
               f"{last['queue wait']:.2f} s queued, {last['tools']:.2f} s in tools each; "
               f"{last['batches']:.0f} engine calls of {last['batch_size']:.1f} rows on average; "
               f"{last['uid_leases']:.0f} sandbox uid leases, {last['uid_wait_s']:.1f} s waited for "
               f"one. The bottleneck: {bottleneck(last)}.")
    return Plot("Episode time", caption, png(fig))
