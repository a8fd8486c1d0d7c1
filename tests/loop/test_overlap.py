"""Rollout and training overlapped (loop/overlap.py): every row is sampled by exactly the
checkpoint the staleness bound names, however slow the trainer or the rollout; the update of
those rows is corrected (train/* staleness and importance-weight metrics); kill -9 anywhere
during the overlap, then resume, gives the tables of an uninterrupted run."""

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from flywheel.settings.config import OverlapSettings
from flywheel.loop.driver import run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.reports.sql import query
from flywheel.policy.checkpoint import recorded_digest

from tests.run_configs import tiny_config

pytestmark = pytest.mark.slow  # full runs

DOMAINS = ("interval", "reverse")
FLAGS = ["--domains", ",".join(DOMAINS), "--tasks-per-domain", "8", "--heldout-per-domain", "4",
         "--n-samples", "8", "--seed", "3", "--max-staleness", "1", "--iterations", "3"]
# `interval` (about 0.6 pass@1 after the warm start) gives groups with signal among the stale rows
# whatever the CPU's rounding: `digitsum` (about 0.05) left iteration 1 without any on one AMD EPYC,
# so its update changed nothing and no row was behind its start. 8 tasks a domain.
SLOW_TRAINER = "[train]\nepochs = 4\nminibatch_size = 32\n"  # 4 epochs: slower than the rollout


def overlapped(epochs: int, heldout: int, staleness: int = 1):
    base = tiny_config(domains=DOMAINS, heldout_per_domain=heldout, n_samples=8)
    return dataclasses.replace(
        base, iterations=3, overlap=OverlapSettings(max_staleness=staleness),
        warm_start=dataclasses.replace(base.warm_start, max_steps=600),
        train=dataclasses.replace(base.train, epochs=epochs))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """One warm-started initial policy (600 steps: some groups with signal), shared by the runs."""
    root = tmp_path_factory.mktemp("warm")
    run_iterations(str(root), dataclasses.replace(overlapped(1, 4), iterations=0))
    return root / "checkpoints" / "initial"


def start_from(warm, run_dir):
    shutil.copytree(warm, run_dir / "checkpoints" / "initial")
    (run_dir.parent / "slow_trainer.toml").write_text(SLOW_TRAINER)


def command(run_dir):
    return [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run_dir),
            "--config", str(run_dir.parent / "slow_trainer.toml"), *FLAGS]


@pytest.fixture(scope="module")
def uninterrupted(warm, tmp_path_factory):
    """The reference run of the kill test, by the CLI with FLAGS (a slow trainer: 4 epochs)."""
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    start_from(warm, run_dir)
    done = subprocess.run(command(run_dir), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir


def stages(run_dir, k):
    return RunLayout(str(run_dir)).read_json(RunLayout(str(run_dir)).commit_marker(k))["stages"]


def check_bound(run_dir, staleness):
    layout = RunLayout(str(run_dir))
    assert layout.committed_iterations() == [0, 1, 2]
    digests = {-1: recorded_digest(layout.checkpoint(None))}
    digests.update({k: recorded_digest(layout.checkpoint(k)) for k in range(3)})
    _, rows = query(str(run_dir), "SELECT iteration, policy_version, checkpoint_digest, count(*) "
                                  "FROM trajectories GROUP BY ALL ORDER BY 1")
    for k, version, digest, _ in rows:
        source = max(k - 1 - staleness, -1)
        assert version == source + 1 and digest == digests[source], (k, version)
    assert {r[0] for r in rows} == {0, 1, 2}
    for k in range(3):  # rollout k began only once the checkpoint it samples was written
        if k - 1 - staleness >= 0:
            assert stages(run_dir, k)["rollout"][0] >= stages(run_dir, k - 1 - staleness)["train"][1]
    _, stale = query(str(run_dir), "SELECT iteration, value FROM metrics WHERE name = "
                                   "'train/stale_rows' ORDER BY 1")
    return dict(stale)


def behind_the_start(run_dir, signal: bool = False) -> dict[int, int]:
    """Rows of each iteration k > 0 sampled by other weights than its update starts from
    (checkpoint k-1); an update whose rows had no signal leaves the weights, and so the digest,
    as they were, and the rows sampled by them are then the update's own (`signal`: only
    rows with a nonzero advantage)."""
    layout = RunLayout(str(run_dir))
    counts = {}
    for k in (1, 2):
        start = recorded_digest(layout.checkpoint(k - 1))
        _, [[n]] = query(str(run_dir), f"SELECT count(*) FROM trajectories WHERE iteration = {k} "
                                       f"AND checkpoint_digest <> '{start}'"
                                       + (" AND advantage <> 0" if signal else ""))
        counts[k] = n
    return counts


def test_a_slow_trainer_overlaps_the_next_rollout_within_the_bound(uninterrupted):
    stale = check_bound(uninterrupted, 1)
    behind = behind_the_start(uninterrupted)
    assert stale == {k: float(n) for k, n in behind.items()}  # rows one version behind
    assert any(behind.values()), "no update changed the weights: the bound was never exercised"
    assert any(behind_the_start(uninterrupted, signal=True).values())  # and weighted
    first_update, next_rollout = stages(uninterrupted, 0)["train"], stages(uninterrupted, 1)["rollout"]
    assert first_update[0] < next_rollout[1] and next_rollout[0] < first_update[1]  # overlapped
    _, rows = query(str(uninterrupted), "SELECT name, min(value), max(value) FROM metrics WHERE "
                                        "iteration > 0 AND name LIKE 'train/is_weight_%' GROUP BY 1")
    figures = {n: (lo, hi) for n, lo, hi in rows}
    assert 0 < figures["train/is_weight_mean"][0] <= figures["train/is_weight_mean"][1] <= 2.0


def test_a_slow_rollout_samples_the_same_versions(warm, tmp_path):
    run_dir = tmp_path / "run"
    start_from(warm, run_dir)
    run_iterations(str(run_dir), overlapped(epochs=1, heldout=48, staleness=2))
    check_bound(run_dir, 2)


def test_kill_9_during_the_overlap_then_resume_gives_the_uninterrupted_tables(warm, uninterrupted,
                                                                              tmp_path):
    run_dir = tmp_path / "run"
    start_from(warm, run_dir)
    cmd = command(run_dir)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    layout = RunLayout(str(run_dir))
    deadline = time.time() + 300
    # kill while iteration 1 is rolled out (its rows are the experience buffer) but not trained
    while time.time() < deadline and proc.poll() is None:
        if layout.exists(layout.rollout_marker(1)) and 1 not in layout.committed_iterations():
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)  # the update's process dies with the driver (PR_SET_PDEATHSIG)
    assert 1 not in layout.committed_iterations()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert layout.committed_iterations() == [0, 1, 2]
    columns = ("iteration, domain, task_id, sample_index, policy_version, checkpoint_digest, "
               "response, response_logprobs, reward_raw, advantage, filtered")
    order = " ORDER BY iteration, domain, task_id, sample_index"
    _, a = query(str(uninterrupted), f"SELECT {columns} FROM trajectories{order}")
    _, b = query(str(run_dir), f"SELECT {columns} FROM trajectories{order}")
    assert a == b and len(a) == 3 * len(DOMAINS) * 8 * 8  # iterations x domains x tasks x samples
    metric = "SELECT iteration, domain, name, value FROM metrics ORDER BY 1, 2, 3"
    assert query(str(uninterrupted), metric)[1] == query(str(run_dir), metric)[1]
    for k in range(3):  # the same updates: the same weights
        assert recorded_digest(layout.checkpoint(k)) == \
            recorded_digest(RunLayout(str(uninterrupted)).checkpoint(k))
    info = json.loads((run_dir / "run.json").read_text())
    assert info["config"]["overlap"]["max_staleness"] == 1
