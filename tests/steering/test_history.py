"""The task history and the error set (steering/history.py) read back with SQL from real tables."""

from flywheel.schemas import TABLES
from flywheel.steering.history import error_set, task_history
from flywheel.schemas.write import write_rows


def attempt(task, iteration, sample, verdict, filter_reason=None, finish="stop", domain="d"):
    row = dict.fromkeys(TABLES["trajectories"].names)
    row.update(run_id="r", iteration=iteration, domain=domain, task_id=task, group_id=task,
               sample_index=sample, policy_version=iteration, prompt="q", response="a",
               verdict=verdict, filtered=filter_reason is not None, filter_reason=filter_reason,
               finish_reason=finish, reward_raw=float(verdict == "pass"))
    return row


def write(root, iteration, rows, errors=()):
    write_rows(f"{root}/tables/trajectories/iteration={iteration}/domain=d/part.parquet",
                  "trajectories", rows)
    if errors:
        write_rows(f"{root}/tables/errors/iteration={iteration}/part.parquet", "errors", list(errors))


def error(task, iteration, sample, kind, error_type):
    row = dict.fromkeys(TABLES["errors"].names)
    row.update(run_id="r", iteration=iteration, domain="d", task_id=task, sample_index=sample,
               stage="execute", kind=kind, error_type=error_type, message="boom", retry_count=0)
    return row


def fixture(root):
    # iteration 0: "solved" passes 2/2; "half" 1/2; "lost" both on the environment;
    #              "a" and "b" fail 2/2 by running out of tokens (a recurring pattern)
    write(root, 0, [attempt("solved", 0, 0, "pass"), attempt("solved", 0, 1, "pass"),
                    attempt("half", 0, 0, "pass"), attempt("half", 0, 1, "fail"),
                    attempt("lost", 0, 0, "error", "environment_error"),
                    attempt("lost", 0, 1, "error", "environment_error"),
                    *(attempt(t, 0, i, "fail", "zero_variance", "length")
                      for t in "ab" for i in range(2))],
          [error("lost", 0, 0, "environment", "SandboxTimeout"),
           error("lost", 0, 1, "environment", "SandboxTimeout")])
    # iteration 1: "solved" again 2/2; "half" 0/2 (ends stopped: a pattern of one task only)
    write(root, 1, [attempt("solved", 1, 0, "pass"), attempt("solved", 1, 1, "pass"),
                    attempt("half", 1, 0, "fail", "zero_variance"),
                    attempt("half", 1, 1, "fail", "zero_variance")])


def test_task_history_folds_visits(tmp_path):
    root = str(tmp_path)
    fixture(root)
    h = task_history(f"{root}/tables", before=2)
    assert (h["solved"].visits, h["solved"].passes, h["solved"].solved_visits) == (2, 4, 2)
    assert h["solved"].pattern is None and h["solved"].last_pass_rate == 1.0
    assert (h["half"].passes, h["half"].scored, h["half"].last_pass_rate) == (1, 4, 0.0)
    assert h["half"].pattern is None  # its failure pattern is its own only: not recurring
    assert h["lost"].scored == 0 and h["lost"].last_env_failed and h["lost"].env_failed_visits == 1
    assert h["lost"].last_pass_rate is None
    assert h["a"].pattern == h["b"].pattern == "fail|model||zero_variance|length|"


def test_history_sees_only_earlier_iterations(tmp_path):
    root = str(tmp_path)
    fixture(root)
    h = task_history(f"{root}/tables", before=1)
    assert (h["solved"].visits, h["half"].last_pass_rate) == (1, 0.5)
    assert task_history(f"{root}/tables", before=0) == {}


def test_the_error_set_groups_failures_by_pattern(tmp_path):
    root = str(tmp_path)
    fixture(root)
    patterns = {r["pattern"]: r for r in error_set(f"{root}/tables")}
    tokens = patterns["fail|model||zero_variance|length|"]
    assert (tokens["attempts"], tokens["tasks"], tokens["recurring"]) == (4, 2, True)
    env = patterns["error|environment|SandboxTimeout|environment_error|stop|"]
    assert (env["attempts"], env["tasks"], env["recurring"]) == (2, 1, False)


def test_the_views_are_in_flywheel_sql(tmp_path):
    from flywheel.reports.sql import query
    root = str(tmp_path)
    fixture(root)
    _, rows = query(root, "SELECT task_id, visits FROM task_history ORDER BY task_id")
    assert dict(rows) == {"a": 1, "b": 1, "half": 2, "lost": 1, "solved": 2}
    _, rows = query(root, "SELECT sum(attempts) FROM error_set WHERE recurring")
    assert rows == [(4,)]
