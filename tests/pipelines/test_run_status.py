"""`flywheel status` on a run that another process is writing, then on one that was killed."""

import json
import os
import signal
import subprocess
import time

import pytest

from flywheel.reports.run_status import run_status, status_lines

pytestmark = pytest.mark.slow  # a real run in the background

TINY = ["--tasks-per-domain", "4", "--heldout-per-domain", "4", "--n-samples", "4",
        "--warm-start-max-steps", "20", "--seed", "3"]


def test_status_follows_a_run_in_another_process_and_sees_it_killed(tmp_path):
    run_dir = tmp_path / "run"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "t", "domain": "math", "prompt": "1+1?", "answer": "2"}\n{oops\n')
    proc = subprocess.Popen(["flywheel", "run", "--run-dir", str(run_dir), "--iterations", "3",
                             "--tasks", str(bad), "--domains", "digitsum,interval,pyexpr,reverse",
                             *TINY],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen_stages, polls, deadline = set(), 0, time.time() + 400
    try:
        while time.time() < deadline:
            time.sleep(0.5)
            if not (run_dir / "run.json").exists():
                continue
            status = run_status(str(run_dir))  # never fails, whatever the writer is doing
            polls += 1
            status_lines(status)
            if status["in_progress"]:
                assert status["in_progress"]["writer_alive"] is True
                seen_stages.add(status["in_progress"]["stage"])
            if status["committed"] == [0]:
                break
        assert status["committed"] == [0], status
        assert status["heldout_pass@1"].keys() >= {"*", "digitsum", "interval", "pyexpr", "reverse"}
        assert status["errors"] == {"input": {"read_tasks": 1}}
        out = subprocess.run(["flywheel", "status", "--run-dir", str(run_dir)], capture_output=True,
                             text=True, timeout=120).stdout
        assert "committed iterations: 0 (1 of 3)" in out
        assert "errors by kind: input 1 (read_tasks 1)" in out
        assert "held-out pass@1 (iteration 0): digitsum " in out
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert polls > 3 and {"warm start", "rollout"} <= seen_stages | {"starting"}, seen_stages
    status = run_status(str(run_dir))
    assert status["in_progress"]["writer_alive"] is False
    line = next(x for x in status_lines(status) if x.startswith("in progress"))
    assert f"pid {proc.pid} is gone: resume with flywheel run --run-dir {run_dir}" in line
    as_json = subprocess.run(["flywheel", "status", "--run-dir", str(run_dir), "--format", "json"],
                             capture_output=True, text=True, timeout=120).stdout
    assert json.loads(as_json)["committed"][0] == 0
