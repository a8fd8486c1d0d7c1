"""train_job --serve under torchrun (loop/overlap.py's TrainerLane with processes > 1): one
launch whose two ranks stay up and serve update after update, as one process would, past gaps
longer than the process group's timeout; a crash ends the launch and reaches the lane with the
log's tail; killing the driver leaves no rank behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch.distributed as dist

from flywheel.loop.overlap import TrainerLane, trainer_command
from flywheel.trainer.algorithm import Algorithm
from flywheel.policy.checkpoint import load_checkpoint, save_checkpoint
from flywheel.trainer.train_job import run as run_job
from flywheel.trainer.train_job import spec_of
from flywheel.trainer.train_step import TrainConfig

from tests.trainer.test_distributed import ATOL, _assert_same_stats, _max_diff, _uneven
from tests.trainer.test_stale_policy import _policy, _rows, _write

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()),
    reason="this torch build has no torch.distributed with gloo")

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "FLYWHEEL_TORCH_THREADS": "1"}


def _rows_of_checkpoint_0(tmp_path: Path) -> None:
    """Checkpoint 0 (`ck0`) and 11 rows it sampled, of uneven lengths, so rank 1 has none in
    the last minibatch of 5."""
    start = _policy(0)
    digest = save_checkpoint(str(tmp_path / "ck0"), start, None, {"policy_version": 0})
    _write(tmp_path / "trajectories" / "domain=a", _uneven(_rows(start, digest, n=11)))


def _spec(tmp_path: Path, k: int, name: str) -> dict:
    """Update k of two in a row, as the overlapped loop makes them, writing checkpoint and
    result `name`K: 1 from checkpoint 0; 2 from `name`1 on the same rows (one version stale,
    corrected)."""
    init = tmp_path / ("ck0" if k == 1 else f"{name}1")
    return spec_of(str(tmp_path / "trajectories"), str(init), str(tmp_path / f"{name}{k}"),
                   TrainConfig(minibatch_size=5, epochs=2), seed=k,
                   result=str(tmp_path / f"{name}{k}.json"), algorithm=Algorithm(loss="grpo"),
                   older_checkpoint_uris=[str(tmp_path / "ck0")] if k == 2 else [])


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc: no psutil needed)."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):  # not a process, or gone meanwhile
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow  # 10-20 s of torchrun launches
def test_two_ranks_serve_updates_in_turn_past_the_process_group_timeout(tmp_path):
    """Two updates by one 2-rank launch, the second sent after a wait of twice the process
    group's timeout (rank 0's keep-alive bridges it), write the checkpoints and stats the
    single process writes on the same specs; the end of input ends the launch cleanly."""
    _rows_of_checkpoint_0(tmp_path)
    single = {k: run_job(_spec(tmp_path, k, "single"))["stats"] for k in (1, 2)}  # here
    replies, paths = [], []
    with open(tmp_path / "server.log", "w") as log:
        server = subprocess.Popen(trainer_command("--serve", 2), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=log, text=True,
                                  env={**ENV, "FLYWHEEL_TRAINER_PG_TIMEOUT_S": "4"}, cwd=REPO)
    try:
        for k in (1, 2):
            paths.append(str(tmp_path / f"spec{k}.json"))
            Path(paths[-1]).write_text(json.dumps(_spec(tmp_path, k, "ranks")))
            server.stdin.write(paths[-1] + "\n")
            server.stdin.flush()
            replies.append(server.stdout.readline().strip())
            time.sleep(8 if k == 1 else 0)  # a rollout, between updates
        server.stdin.close()
        server.wait(timeout=60)
    finally:
        server.kill()
    output = (tmp_path / "server.log").read_text()[-3000:]
    assert replies == [f"done {path}" for path in paths], output
    assert server.returncode == 0, output
    for k in (1, 2):
        one, two = (load_checkpoint(str(tmp_path / f"{n}{k}")) for n in ("single", "ranks"))
        diff = _max_diff(one.policy.module.state_dict(), two.policy.module.state_dict())
        assert diff <= ATOL[6], f"update {k}: max |weight difference| {diff:.3g}"
        _assert_same_stats(json.loads((tmp_path / f"ranks{k}.json").read_text())["stats"],
                           single[k])
    assert single[2]["stale_rows"] == 11  # the second update trained off-policy


@pytest.mark.slow  # 10-20 s of torchrun launches
def test_the_lane_reports_a_crash_with_the_log_tail_and_ends_the_launch(tmp_path):
    """A lane of 2 ranks: an update runs, then one whose trajectories are missing crashes on
    both ranks; the lane reports it with the traceback, the launch has exited non-zero, and
    close() returns at once."""
    _rows_of_checkpoint_0(tmp_path)
    first = _spec(tmp_path, 1, "lane")
    lane = TrainerLane(processes=2, workdir=str(tmp_path))
    lane.submit(1, first, {})
    assert lane.collect(1)[0].result["stats"]["n_steps"] == 6
    lane.submit(2, {**first, "trajectories_uri": str(tmp_path / "missing")}, {})
    with pytest.raises(RuntimeError) as failure:
        lane.collect(2)
    assert "the update of iteration 2 failed (failed " in str(failure.value)
    assert "FileNotFoundError: no trajectories table" in str(failure.value)
    assert lane.server.wait(timeout=30) != 0
    started = time.time()
    lane.close()
    assert time.time() - started < 5


@pytest.mark.slow  # 10-20 s of torchrun launches
def test_closing_the_lane_ends_every_rank_cleanly(tmp_path):
    """close() after the updates: end of input, every rank leaves the loop, torchrun exits 0."""
    _rows_of_checkpoint_0(tmp_path)
    first = _spec(tmp_path, 1, "lane")
    lane = TrainerLane(processes=2, workdir=str(tmp_path))
    lane.submit(1, first, {})
    lane.collect(1)
    ranks = _children(lane.server.pid)
    assert len(ranks) == 2
    lane.close()
    assert lane.server.returncode == 0
    assert not any(_alive(pid) for pid in ranks)


DRIVER = """
import sys, time
from flywheel.loop.overlap import TrainerLane
lane = TrainerLane(processes=2, workdir=sys.argv[1])
lane.submit(1, {first}, {{}})
lane.collect(1)
lane.submit(2, {long}, {{}})
print(lane.server.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow  # 10 s: a real torchrun launch killed mid-update; the quick tier keeps the ranks' serve loop tests
def test_killing_the_driver_mid_update_leaves_no_rank(tmp_path):
    """A driver whose lane's 2 ranks are in an update (of minutes) is SIGKILLed: torchrun dies
    with the lane's thread, and each rank with torchrun (which cannot stop them once
    SIGKILLed), within seconds and before the update writes its checkpoint."""
    _rows_of_checkpoint_0(tmp_path)
    first = _spec(tmp_path, 1, "lane")
    long = {**first, "cfg": {**first["cfg"], "epochs": 5000},
            "out_checkpoint_uri": str(tmp_path / "never")}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER.format(first=repr(first), long=repr(long)),
         str(tmp_path)], stdout=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    try:
        launcher = int(driver.stdout.readline())
        ranks = _children(launcher)
        assert len(ranks) == 2 and all(_alive(pid) for pid in [launcher, *ranks])
        time.sleep(1)  # well into the update
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    deadline = time.time() + 10
    while any(_alive(pid) for pid in [launcher, *ranks]) and time.time() < deadline:
        time.sleep(0.1)
    left = [pid for pid in [launcher, *ranks] if _alive(pid)]
    for pid in left:  # not to outlive the test
        os.kill(pid, signal.SIGKILL)
    assert not left and not (tmp_path / "never").exists()
