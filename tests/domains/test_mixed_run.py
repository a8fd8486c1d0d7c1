"""Acceptance: one `flywheel run` iteration over native kinds and reasoning-gym domains writes
trajectories for every domain (through the real pipeline, sandbox and verifiers)."""

import pytest

from flywheel.cli.main import main
from flywheel.reports.sql import query

pytestmark = pytest.mark.slow  # full runs: `python -m pytest -m 'not slow'` skips them

DOMAINS = ["add", "math_linear", "extract_invoice", "sql_shop", "shell_files", "py_functions",
           "py_mbpp", "rg_chain_sum", "rg_countdown"]


def test_a_mixed_run_has_rows_for_every_domain(tmp_path):
    pytest.importorskip("reasoning_gym")
    run_dir = str(tmp_path / "run")
    # a short warm start over the domains that have demonstrations (long prompts are truncated)
    assert main(["run", "--run-dir", run_dir, "--domains", ",".join(DOMAINS), "--iterations", "1",
                 "--tasks-per-domain", "2", "--heldout-per-domain", "2", "--n-samples", "2",
                 "--warm-start-max-steps", "10"]) == 0
    _, rows = query(run_dir, "SELECT domain, count(*), count(verifier) FROM trajectories GROUP BY 1")
    assert {r[0] for r in rows} == set(DOMAINS) and all(r[1] == r[2] == 4 for r in rows)
    _, errors = query(run_dir, "SELECT count(*) FROM errors WHERE kind <> 'model'")
    assert errors[0][0] == 0
