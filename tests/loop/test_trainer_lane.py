"""TrainerLane (loop/overlap.py): a job that cannot even start fails, never hangs."""
from __future__ import annotations

import pytest

from flywheel.loop.overlap import TrainerLane


def test_a_job_that_cannot_be_written_fails_instead_of_hanging(tmp_path):
    lane = TrainerLane(workdir=str(tmp_path / "not-yet-made"))  # the lane makes its folder
    try:
        lane.submit(0, {"cfg": object()}, {})  # no JSON for this spec: the lane thread's error
        with pytest.raises(RuntimeError, match="iteration 0 could not run: TypeError"):
            lane.collect(0)
    finally:
        lane.close()
    assert lane.server is None  # nothing was started for it
