"""Resuming a run directory takes its sandbox backend only when a run may choose it: one that
isolates nothing (or sends episodes elsewhere) must be named on the command line, as for
`flywheel replay` (loop/run_sandbox.py). A run directory may come from someone else."""

import json
import subprocess
import sys

import pytest

RUN = ["--policy", "standin", "--domains", "add", "--tasks-per-domain", "2",
       "--heldout-per-domain", "1", "--n-samples", "2", "--seed", "0"]


def flywheel(*args):
    return subprocess.run([sys.executable, "-m", "flywheel.cli.main", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_run_directory_cannot_choose_an_unisolated_sandbox_on_resume(tmp_path):
    run_dir = tmp_path / "run"
    first = flywheel("run", "--run-dir", str(run_dir), "--iterations", "1", *RUN)
    assert first.returncode == 0, first.stderr[-2000:]
    run_json = run_dir / "run.json"
    info = json.loads(run_json.read_text())
    for backend in ("unsafe-subprocess", "remote", "someone-elses-plugin"):
        info["config"]["rollout"]["sandbox"] = backend  # as someone else's run.json would say
        run_json.write_text(json.dumps(info))
        refused = flywheel("run", "--run-dir", str(run_dir), "--iterations", "2")
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert f"names the sandbox backend '{backend}'" in refused.stdout + refused.stderr
        assert f"--sandbox {backend}" in refused.stdout + refused.stderr
        assert not (run_dir / "iterations" / "1").exists()
    info["config"]["rollout"]["sandbox"] = "unsafe-subprocess"
    run_json.write_text(json.dumps(info))
    trusted = flywheel("run", "--run-dir", str(run_dir), "--iterations", "2",
                       "--sandbox", "unsafe-subprocess")
    assert trusted.returncode == 0, trusted.stderr[-2000:]
    assert (run_dir / "iterations" / "1" / "_COMMITTED").exists()
