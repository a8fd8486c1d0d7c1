"""A `flywheel run` killed with SIGKILL mid-iteration, for the resume tests (the tiny policy's in
tests/loop/test_driver.py, the hf policy's in tests/policy/hf/test_hf_run.py): both kill at the
same point, so a resume always finds iteration 0 committed and iteration 1 half written."""

import os
import signal
import subprocess
import time
from pathlib import Path

from flywheel.settings.layout import RunLayout


def kill_while_iteration_1_writes(cmd: list[str], run_dir, within_s: float) -> RunLayout:
    """Start `cmd` (a `flywheel run` into `run_dir`) in a session of its own and SIGKILL that
    whole session once iteration 0 is committed and iteration 1 has begun writing trajectories;
    `within_s` bounds the wait (a run that ends first fails the test). The run's layout, which
    then holds iteration 0 alone."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    layout = RunLayout(str(run_dir))
    writing = Path(run_dir) / "tables" / "trajectories" / "iteration=1"
    deadline = time.time() + within_s
    while time.time() < deadline and proc.poll() is None:
        if layout.committed_iterations() == [0] and writing.exists():
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert layout.committed_iterations() == [0]
    return layout
