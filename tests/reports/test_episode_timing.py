"""The episode-time panel (reports/episode_timing.py): figures from the run log's counters in the
commit markers, the bottleneck named in its caption, nothing for a run without episodes; and a real
rollout with episodes (the loop's own roll_out) drawn with its own numbers."""

import json

import pytest

from flywheel.reports.episode_timing import bottleneck, episode_timing, episode_timing_plot


def write_markers(run_dir, counters_by_iteration):
    for k, counters in counters_by_iteration.items():
        folder = run_dir / "iterations" / str(k)
        folder.mkdir(parents=True)
        (folder / "_COMMITTED").write_text(json.dumps({"iteration": k, "counters": counters}))


def test_per_episode_times_batch_sizes_and_the_bottleneck_from_the_run_log(tmp_path):
    write_markers(tmp_path, {
        0: {"episodes_run": 4, "episode_generation_ms_total": 2000, "episode_queue_wait_ms_total": 400,
            "episode_tool_ms_total": 12000, "engine_batches": 10, "engine_batch_rows": 35,
            "sandbox_uid_leases": 8, "sandbox_uid_wait_ms": 0},
        1: {"episodes_run": 2, "episode_generation_ms_total": 9000, "episode_queue_wait_ms_total": 5000,
            "episode_tool_ms_total": 1000, "engine_batches": 4, "engine_batch_rows": 8},
        2: {"tool_calls": 5}})  # a single-turn iteration: no episodes, not drawn
    timing = episode_timing(str(tmp_path))
    assert sorted(timing) == [0, 1]
    assert timing[0] == {"episodes": 4, "sampling": 0.4, "queue wait": 0.1, "tools": 3.0,
                         "batches": 10, "batch_size": 3.5, "uid_leases": 8, "uid_wait_s": 0.0}
    assert bottleneck(timing[0]) == "the sandbox: tool calls took 86% of an episode's time"
    assert bottleneck(timing[1]) == ("the model: asking for actions took 90% of an episode's time "
                                     "(50% waiting in the engine's queue)")
    plot = episode_timing_plot(str(tmp_path))
    assert plot.png.startswith(b"\x89PNG")
    assert ("Iteration 1: 2 episodes, 2.00 s sampling, 2.50 s queued, 0.50 s in tools each; "
            "4 engine calls of 2.0 rows on average") in plot.caption


def test_a_run_without_episodes_draws_no_panel(tmp_path):
    write_markers(tmp_path, {0: {"tool_calls": 3}})
    (tmp_path / "iterations" / "1").mkdir()  # not committed
    (tmp_path / "iterations" / "2").mkdir()
    (tmp_path / "iterations" / "2" / "_COMMITTED").write_text("")  # an empty marker
    assert episode_timing_plot(str(tmp_path)) is None


@pytest.mark.slow  # a real Beam rollout with episodes
def test_a_rollout_with_episodes_draws_its_own_numbers(tmp_path):
    """The loop's own roll_out (a real rollout of tiny-policy episodes on the local sandbox) gives
    the commit marker its counters; the HTML page draws the panel from them, with real figures."""
    from apache_beam.options.pipeline_options import PipelineOptions

    from flywheel.domains.episode_settings import EpisodeSettings
    from flywheel.settings.config import PolicySpec, RolloutSettings, RunConfig
    from flywheel.loop.iteration import roll_out
    from flywheel.settings.layout import RunLayout
    from flywheel.reports.html import render_report
    config = RunConfig(seed=3, policy=PolicySpec(), episode=EpisodeSettings(max_turns=2),
                       rollout=RolloutSettings(domains=("fix_function",), tasks_per_domain=2,
                                               heldout_per_domain=0, n_samples=2))
    layout = RunLayout(str(tmp_path / "run"))
    marker = roll_out(config, layout, {"run_id": "r"}, 0, None, PipelineOptions([]), lambda *_: None)
    layout.write_json(layout.commit_marker(0), marker)
    timing = episode_timing(layout.root)[0]
    assert timing["episodes"] == 4 and timing["batches"] >= 1 and timing["batch_size"] >= 1
    assert timing["sampling"] > 0 and timing["tools"] > 0, timing
    page, plots = render_report(layout.root)
    panel = next(p for p in plots if p.title == "Episode time")
    assert "Iteration 0: 4 episodes" in panel.caption and "The bottleneck: the " in panel.caption
    assert '<img alt="Episode time"' in page
