"""`--environment NAME` gives every task-file row that names none an environment: in `flywheel
tasks validate` (checked there: a name with no environment built is told per row) and in
`flywheel run` (the rollout's ReadTasks, a real Beam pipeline); a row's own environment wins,
and rows of domains that run in no environment are left as they are."""

import json

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from flywheel.cli import main as cli_main
from flywheel.cli.tasks import load_tasks
from flywheel.transforms.tasks import ReadTasks

ROW = {"task_id": "calc", "domain": "repo", "prompt": "total() subtracts.",
       "repo": {"files": {"calc/__init__.py": "", "calc/ops.py": "def total(xs):\n    return 0\n"}},
       "hidden_tests": [{"id": "t", "pytest": "tests/test_x.py::test_total"}]}
OTHER = {"task_id": "add", "domain": "py_mbpp", "prompt": "Write add(a, b).", "answer": "",
         "test": "assert add(1, 2) == 3"}


def task_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    rows = [ROW, {**ROW, "task_id": "own", "environment": "theirs"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_validate_gives_rows_without_one_the_environment(environments, tmp_path, capsys):
    path = task_file(tmp_path)
    tasks, problems = load_tasks([str(path)], environment="pytest-env")
    assert [t.get("environment") for t in tasks] == ["pytest-env"] and len(problems) == 1
    assert "line 2: field `environment`: no environment 'theirs'" in problems[0]  # its own wins
    assert cli_main.main(["tasks", "validate", str(path), "--no-run", "--environment", "nowhere"]) == 1
    out = capsys.readouterr().out
    assert "line 1: field `environment`: no environment 'nowhere'" in out and "0 valid tasks, 2 problems" in out


def test_run_reads_task_files_with_the_environment(environments, tmp_path):
    from flywheel.domains.environments import with_environment
    from flywheel.loop.options import FlywheelOptions
    config, explicit = FlywheelOptions(["--tasks", "t.jsonl", "--environment", "swe"]).run_config()
    assert config.rollout.task_environment == "swe" and "rollout.task_environment" in explicit
    assert with_environment(OTHER, "swe") == OTHER  # a domain that runs in no environment
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    with beam.Pipeline() as p:
        read = p | ReadTasks(patterns=[str(path)], environment="pytest-env")
        assert_that(read["tasks"] | beam.Map(lambda t: (t["task_id"], t.get("environment"))),
                    equal_to([("calc", "pytest-env")]))
