"""The stage timeline (reports/timeline.py): figures from the commit markers' windows, and the
picture in the HTML report."""

import json

import pytest

from flywheel.reports.timeline import stage_windows, timeline_figures, timeline_plot


def write_markers(run_dir, stages):
    for k, windows in stages.items():
        folder = run_dir / "iterations" / str(k)
        folder.mkdir(parents=True)
        (folder / "_COMMITTED").write_text(json.dumps({"iteration": k, "stages": windows}))


def test_overlapped_windows_give_the_time_both_lanes_ran():
    windows = {0: {"rollout": (0.0, 10.0), "train": (10.0, 30.0)},
               1: {"rollout": (10.0, 25.0), "train": (30.0, 45.0)},
               2: {"rollout": (30.0, 40.0), "train": (45.0, 60.0)}}
    f = timeline_figures(windows)
    assert f["span_s"] == 60.0 and f["iterations"] == 3
    assert f["iterations_per_hour"] == pytest.approx(180.0)
    assert f["rollout_busy_s"] == 35.0 and f["train_busy_s"] == 50.0
    assert f["both_s"] == 25.0  # 10-25 under update 0, 30-40 under update 1
    assert f["train_busy_share"] == pytest.approx(50 / 60)


def test_a_synchronous_run_never_runs_both(tmp_path):
    write_markers(tmp_path, {0: {"rollout": [0, 5], "train": [5, 8]},
                             1: {"rollout": [8, 12], "train": [12, 15]}})
    (tmp_path / "iterations" / "2").mkdir()  # not committed: left out
    windows = stage_windows(str(tmp_path))
    assert sorted(windows) == [0, 1]
    assert timeline_figures(windows)["both_s"] == 0.0
    plot = timeline_plot(str(tmp_path))
    assert plot.png.startswith(b"\x89PNG") and "2 iterations in 15 s" in plot.caption


def test_markers_without_stages_draw_nothing(tmp_path):
    folder = tmp_path / "iterations" / "0"
    folder.mkdir(parents=True)
    (folder / "_COMMITTED").write_text(json.dumps({"iteration": 0, "rollout_seconds": 3}))
    assert timeline_plot(str(tmp_path)) is None
