"""The README's first commands are real: install-and-run, the test command, and the SQL example."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from flywheel.domains.registry import DEFAULT_DOMAINS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)
TINY = ["--iterations", "1", "--tasks-per-domain", "4", "--heldout-per-domain", "4",
        "--n-samples", "4", "--warm-start-max-steps", "20"]


def test_first_two_commands_are_install_and_run_then_the_test_suite():
    assert BLOCKS[0].strip() == "pip install -e . && flywheel run"
    assert BLOCKS[1].strip() == "pip install -e '.[test]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest\n" in ci and "pip install -q -e '.[test]'" in ci


@pytest.mark.slow
def test_install_and_run_then_sql(tmp_path):
    install, run = [shlex.split(c) for c in BLOCKS[0].strip().split(" && ")]
    subprocess.run([sys.executable, "-m", *install], cwd=ROOT, check=True, capture_output=True)
    run_dir = tmp_path / "run"
    done = subprocess.run([*run, "--run-dir", str(run_dir), *TINY], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "held-out pass@1" in done.stdout and "flywheel sql" in done.stdout
    sql = next(line for line in BLOCKS[2].splitlines() if "trajectories GROUP BY 1" in line)
    args = shlex.split(sql.replace("runs/<timestamp>", str(run_dir)))
    out = subprocess.run([*args, "--format", "json"], capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert {r["domain"] for r in rows} == set(DEFAULT_DOMAINS)
    out = subprocess.run([*args, "--format", "csv"], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[0] == "domain,avg(reward_raw)"
    bad = subprocess.run(["flywheel", "sql", "SELECT nope FROM trajectories", "--run-dir",
                          str(run_dir)], capture_output=True, text=True)
    assert bad.returncode == 1 and "nope" in bad.stdout + bad.stderr
