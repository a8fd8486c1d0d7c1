"""A run directory on gs:// end to end, against a real GCS emulator (`gcs_emulator`:
tests/conftest.py): tables, checkpoints, run.json and commit markers written there, a run killed
with SIGKILL mid-iteration resumed to the end, and `flywheel sql`, `status` and `report` on it."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from flywheel.schemas.storage import read_file, resolve_uri

RUN = ["--iterations", "2", "--policy", "standin", "--domains", "add,pyexpr", "--tasks-per-domain", "3",
       "--heldout-per-domain", "2", "--n-samples", "2", "--seed", "5"]


def flywheel(*args, env, **kwargs):
    return subprocess.run([sys.executable, "-m", "flywheel.cli.main", *args], env=env,
                          capture_output=True, text=True, timeout=300, **kwargs)


def exists(uri: str) -> bool:
    fs, path = resolve_uri(uri)
    return fs.get_file_info(path).type.name != "NotFound"


@pytest.mark.slow
def test_a_gs_run_survives_kill_9_and_is_queried(gcs_emulator, tmp_path, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    env, run = {**os.environ, "STORAGE_EMULATOR_HOST": gcs_emulator}, "gs://runs/e2e"
    proc = subprocess.Popen([sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", run, *RUN],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not exists(f"{run}/iterations/0/_COMMITTED"):
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "iteration 0 never committed"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)  # iteration 1 is under way
    proc.wait()
    assert not exists(f"{run}/iterations/1/_COMMITTED")

    resumed = flywheel("run", "--run-dir", run, *RUN, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for path in ("run.json", "run.log", "iterations/1/_COMMITTED", "checkpoints/iteration=1/config.json"):
        assert exists(f"{run}/{path}"), path

    sql = flywheel("sql", "SELECT iteration, count(*), count(DISTINCT task_id || sample_index) "
                   "FROM trajectories GROUP BY 1 ORDER BY 1", "--run-dir", run, "--format", "json", env=env)
    assert sql.returncode == 0, sql.stderr[-2000:]
    rows = [json.loads(line) for line in sql.stdout.splitlines()]
    assert [[r["iteration"], r["count_star()"], r[next(k for k in r if "DISTINCT" in k)]] for r in rows] == \
        [[0, 12, 12], [1, 12, 12]]  # 2 domains x 3 tasks x 2 samples, once each: nothing lost, nothing twice
    status = flywheel("status", "--run-dir", run, env=env)
    assert status.returncode == 0 and "(2 of 2)" in status.stdout, status.stdout
    report = flywheel("report", "--run-dir", run, "--html", str(tmp_path / "r.html"), env=env)
    assert report.returncode == 0 and (tmp_path / "r.html").stat().st_size > 10_000, report.stderr
    report = flywheel("report", "--run-dir", run, "--html", f"{run}/report/r.html", env=env)
    page = read_file(f"{run}/report/r.html")  # the page written to the bucket itself
    assert report.returncode == 0 and len(page) > 10_000 and page.count(b"<img") == \
        (tmp_path / "r.html").read_bytes().count(b"<img") > 0, report.stderr
