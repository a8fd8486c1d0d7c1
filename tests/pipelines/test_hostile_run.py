"""A whole `flywheel run` whose policy answers hostile text: the run goes on to the end (exit 0),
each attempt is a failed one (reward 0) and nothing is blamed on the task or the environment.

The `standin` policy answers one fixed text to every prompt; the tasks (HumanEval-style, with
tools) allow it thousands of tokens, so the whole text reaches the trusted side."""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pytest

TASK = {"entry_point": "inc",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n",
        "max_new_tokens": 16_000}


@pytest.mark.slow
@pytest.mark.parametrize("response, tool_error", [
    ("<tool_call>" + "[" * 5000, True),    # a tool call nested too deeply for json: not a call
    ("x" + "**x" * 5000, False),           # a syntax tree too deep for the parser: it runs, and fails
], ids=["deep-tool-call", "deep-syntax-tree"])
def test_a_run_whose_policy_answers_hostile_text_ends_and_scores_it_zero(tmp_path, response,
                                                                        tool_error):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({**TASK, "task_id": f"inc/{i}", "prompt": (
        f"def inc(x):\n    \"\"\"x plus one (variant {i})\"\"\"\n")}) + "\n" for i in range(8)))
    run_dir = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "flywheel.cli.main", "run", "--run-dir", str(run_dir),
         "--iterations", "1", "--tasks", str(tasks), "--domains", "python_tests",
         "--tasks-per-domain", "2", "--heldout-per-domain", "1", "--n-samples", "2",
         "--max-turns", "2", "--policy", "standin", "--policy-options",
         f"mode=fixed,response={response}", "--seed", "0"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    tables = run_dir / "tables"
    rows = duckdb.sql(f"SELECT verdict, reward_raw, turns FROM read_parquet("
                      f"'{tables}/trajectories/**/*.parquet', hive_partitioning=true)").fetchall()
    assert rows and all(v == "fail" and r == 0.0 for v, r, _ in rows), rows
    assert all(bool(t["tool_error"]) == tool_error for _, _, turns in rows for t in turns), rows
    kinds = duckdb.sql(f"SELECT DISTINCT kind FROM read_parquet('{tables}/errors/**/*.parquet', "
                       f"hive_partitioning=true)").fetchall() if list(tables.glob("errors/**/*.parquet")) else []
    assert set(kinds) <= {("model",)}, kinds
