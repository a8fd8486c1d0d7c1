"""The iteration loop end to end: commit markers, resume after kill -9, reproducibility."""

import json
import subprocess
import sys

import pytest

from flywheel.domains.registry import DEFAULT_DOMAINS
from flywheel.loop.driver import RunConfigMismatch, run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.reports.sql import query
from flywheel.schemas import SCHEMA_VERSION
from flywheel.policy.checkpoint import load_checkpoint

from tests.killed_run import kill_while_iteration_1_writes
from tests.run_configs import tiny_config

pytestmark = pytest.mark.slow  # full runs: `python -m pytest -m 'not slow'` skips them

TINY_FLAGS = ["--tasks-per-domain", "4", "--heldout-per-domain", "4", "--n-samples", "4",
              "--warm-start-max-steps", "20", "--seed", "3"]


def trajectory_keys(run_dir):
    _, rows = query(str(run_dir), "SELECT iteration, task_id, sample_index FROM trajectories")
    return rows


def test_iterations_commit_and_checkpoints_chain(tmp_path):
    config = tiny_config()
    run_iterations(str(tmp_path), config)
    layout = RunLayout(str(tmp_path))
    assert layout.committed_iterations() == [0, 1]
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["seed"] == 3 and info["schema_versions"]["trajectories"] == SCHEMA_VERSION
    assert load_checkpoint(layout.checkpoint(1)).meta["policy_version"] == 2
    first, rss = (layout.read_json(layout.commit_marker(k))["driver_peak_rss_mb"] for k in (0, 1))
    assert 0 < first["rollout"] <= first["train"] <= rss["rollout"] <= rss["train"]  # high-water
    _, rows = query(str(tmp_path), "SELECT iteration, min(policy_version), max(policy_version) "
                                   "FROM trajectories GROUP BY 1 ORDER BY 1")
    assert rows == [(0, 0, 0), (1, 1, 1)]
    _, rows = query(str(tmp_path), "SELECT count(*) FROM metrics WHERE name = 'train/n_steps'")
    assert rows == [(2,)]
    from flywheel.reports.report import metric_table
    table = metric_table(str(tmp_path), "zero_variance_frac")
    assert table.row_count == 2 and len(table.columns) == len(DEFAULT_DOMAINS) + 2
    # resuming a complete run does nothing; extending it runs only the new iteration
    run_iterations(str(tmp_path), tiny_config().__class__(**{**config.__dict__, "iterations": 3}))
    assert layout.committed_iterations() == [0, 1, 2]
    keys = trajectory_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 3 * len(DEFAULT_DOMAINS) * 4 * 4


def test_resume_refuses_changed_settings(tmp_path):
    run_iterations(str(tmp_path), tiny_config(), explicit={"seed"})
    other = tiny_config().__class__(**{**tiny_config().__dict__, "seed": 4})
    with pytest.raises(RunConfigMismatch, match="seed=3, not 4"):
        run_iterations(str(tmp_path), other, explicit={"seed"})


def test_same_seed_same_tables(tmp_path):
    for name in ("a", "b"):
        run_iterations(str(tmp_path / name), tiny_config().__class__(
            **{**tiny_config().__dict__, "iterations": 1}))
    columns = ("iteration, domain, task_id, sample_index, response, response_token_ids, "
               "reward_raw, advantage, verdict, filtered")
    order = " ORDER BY domain, task_id, sample_index"
    _, a = query(str(tmp_path / "a"), f"SELECT {columns} FROM trajectories{order}")
    _, b = query(str(tmp_path / "b"), f"SELECT {columns} FROM trajectories{order}")
    assert a == b and len(a) > 0
    _, la = query(str(tmp_path / "a"), f"SELECT response_logprobs FROM trajectories{order}")
    _, lb = query(str(tmp_path / "b"), f"SELECT response_logprobs FROM trajectories{order}")
    assert la == lb


def test_kill_9_mid_iteration_then_resume_loses_and_duplicates_nothing(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run_dir),
           "--iterations", "3", *TINY_FLAGS]
    layout = kill_while_iteration_1_writes(cmd, run_dir, within_s=240)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resuming at iteration 1" in done.stdout
    assert layout.committed_iterations() == [0, 1, 2]
    keys = trajectory_keys(run_dir)
    assert len(keys) == len(set(keys)) == 3 * len(DEFAULT_DOMAINS) * 4 * 4
    _, rows = query(str(run_dir), "SELECT iteration, count(*) FROM metrics "
                                  "WHERE name = 'heldout_pass@1' GROUP BY 1 ORDER BY 1")
    n = len(DEFAULT_DOMAINS) + 1
    assert rows == [(0, n), (1, n), (2, n)]
