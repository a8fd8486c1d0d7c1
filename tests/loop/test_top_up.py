"""Dynamic sampling (loop/top_up.py): a batch short of signal is topped up with further
tasks, bounded in rounds and attempts, never stalling, its cost in `steer/top_up_*` rows."""

import pytest

from flywheel.settings.config import RunConfig
from flywheel.loop.driver import run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.steering_plan import SamplingPlan
from flywheel.loop.top_up import TOP_UP_BASE, batch_signal, round_plan
from flywheel.reports.sql import query
from flywheel.schemas import TABLES
from flywheel.schemas.write import write_rows

from tests.run_configs import tiny_config


def row(domain, task, sample, filtered):
    r = dict.fromkeys(TABLES["trajectories"].names)
    r.update(run_id="r", iteration=0, domain=domain, task_id=task, group_id=f"g-{task}",
             sample_index=sample, policy_version=0, prompt="q", response="a", verdict="fail",
             filtered=filtered)
    return r


def test_batch_signal_counts_groups_and_the_round_goes_where_signal_comes_from(tmp_path):
    # add: 4 groups, 2 with signal; reverse: 4 groups, none
    rows = [row("add", f"a{t}", i, filtered=t >= 2) for t in range(4) for i in range(2)]
    rows += [row("reverse", f"r{t}", i, filtered=True) for t in range(4) for i in range(2)]
    for domain in ("add", "reverse"):
        write_rows(f"{tmp_path}/tables/trajectories/iteration=0/domain={domain}/part-00000"
                      ".parquet", "trajectories", [r for r in rows if r["domain"] == domain])
    seen = batch_signal(RunLayout(str(tmp_path)), 0)
    assert (seen["groups"], seen["signal"], seen["attempts"]) == (8, 2, 16)
    assert seen["domains"]["add"] == {"attempts": 8, "groups": 4, "signal": 2}
    config = tiny_config(domains=("add", "reverse"))
    plan = round_plan(config, 0, 1, seen, 22, SamplingPlan([]))
    shares = plan.sample["budget"].shares(["add", "reverse"])
    assert shares["add"] == pytest.approx(0.55 / 0.6)  # 0.5 x (0.5 + 0.05) vs 0.5 x 0.05
    assert all(r.start >= TOP_UP_BASE for r in plan.ranges) and plan.prefix == "topup-1"
    assert plan.sample["exclude"] == seen["used"] and plan.top_up


@pytest.mark.slow
def test_a_batch_short_of_signal_is_topped_up_within_its_bounds(tmp_path):
    # a barely warm policy: most groups fail alike; ask for half of the groups with signal
    config = RunConfig.from_dict({**tiny_config(domains=("add", "reverse")).to_dict(),
                                  "iterations": 1,
                                  "steering": {"top_up": 0.5, "top_up_rounds": 3,
                                               "top_up_attempts": 2.0}})
    run = str(tmp_path / "run")
    run_iterations(run, config)
    _, figures = query(run, "SELECT name, value FROM metrics WHERE name LIKE 'steer/%'")
    f = dict(figures)
    batch = 2 * 4 * 4  # 2 domains x 4 tasks x 4 samples
    assert 1 <= f["steer/top_up_rounds"] <= 3
    assert 0 < f["steer/top_up_attempts"] <= 2.0 * batch
    assert f["steer/signal_groups_after"] >= f["steer/signal_groups_before"]
    assert f["steer/top_up_filled"] == float(f["steer/signal_groups_after"]
                                             >= f["steer/signal_groups_target"])
    _, counts = query(run, "SELECT count(*), count(DISTINCT group_id), count(DISTINCT task_id) "
                           "FROM trajectories")
    total, groups, tasks = counts[0]
    assert total == batch + f["steer/top_up_attempts"] and groups == tasks == total // 4
    # the trainer trained on the topped-up batch: the kept rows of every round
    _, kept = query(run, "SELECT count(*) FILTER (WHERE NOT filtered) FROM trajectories")
    _, trained = query(run, "SELECT value FROM metrics WHERE name = 'train/n_sequences'")
    assert trained == [(float(kept[0][0]),)]
