"""A steered run end to end (pipelines/steering_plan.py, transforms/sample_by_budget.py): the
budget's quotas over built-in and task-file domains, the curriculum's revisits, the plan and
`steer/*` metrics, the same selection on a rerun, and an unsteered plan that is today's."""

import json

import pytest

from flywheel.settings.config import RunConfig, SteeringSettings
from flywheel.loop.driver import run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import task_ranges
from flywheel.pipelines.steering_plan import plan_iteration
from flywheel.reports.sql import query

from tests.run_configs import tiny_config


def python_tasks(path, n=6):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"task_id": f"py{i}", "domain": "python_tests",
                                "prompt": f"def f{i}(x):\n", "entry_point": f"f{i}",
                                "test": f"def check(candidate):\n    assert candidate({i}) == {i}\n"})
                    + "\n")


def steered(tmp_path, **steering) -> RunConfig:
    python_tasks(tmp_path / "tasks.jsonl")
    base = tiny_config(domains=("add", "reverse"), task_files=(str(tmp_path / "tasks.jsonl"),))
    return RunConfig.from_dict({**base.to_dict(), "steering": steering})


def test_an_unsteered_plan_is_todays_ranges(tmp_path):
    config = tiny_config()
    assert config.steering == SteeringSettings()
    for k in range(3):
        plan = plan_iteration(config, RunLayout(str(tmp_path)), k, task_ranges(config, k))
        assert plan.sample is None and plan.ranges == task_ranges(config, k)


@pytest.mark.slow
def test_budget_quotas_cover_built_in_and_task_file_domains_and_a_rerun_selects_the_same(tmp_path):
    # 32 attempts / 4 samples = 8 tasks; shares add 3/5, reverse 1/5, python_tests (a task
    # file's domain, unknown before the read) 1/5: quotas 4.8, 1.6, 1.6 -> 5, 1, 2
    config = steered(tmp_path, weights=["add=3"], attempts=32, sampler="curriculum",
                     error_share=0.25)
    run = tmp_path / "run"
    run_iterations(str(run), config)
    _, rows = query(str(run), "SELECT iteration, domain, count(DISTINCT task_id), count(*) "
                              "FROM trajectories GROUP BY ALL ORDER BY ALL")
    assert rows == [(k, d, q, 4 * q) for k in (0, 1)
                    for d, q in (("add", 5), ("python_tests", 2), ("reverse", 1))]
    _, shares = query(str(run), "SELECT domain, value FROM metrics WHERE iteration = 1 "
                                "AND name = 'steer/planned_share' ORDER BY domain")
    assert shares == [("add", pytest.approx(0.6)), ("python_tests", pytest.approx(0.2)),
                      ("reverse", pytest.approx(0.2))]
    plan = json.loads((run / "iterations" / "1" / "plan.json").read_text())
    assert plan["sampler"] == "curriculum" and plan["estimated_quotas"]["add"] >= 5
    # iteration 1 offers the task file's 6 tasks: the 2 attempted before and 4 never seen
    _, offered = query(str(run), "SELECT sum(value) FILTER (WHERE name = 'steer/candidates'), "
                                 "sum(value) FILTER (WHERE name = 'steer/candidates_unseen') "
                                 "FROM metrics WHERE iteration = 1 AND domain = 'python_tests'")
    assert offered == [(6.0, 4.0)]
    sql = "SELECT task_id FROM trajectories WHERE iteration = 1 GROUP BY 1 ORDER BY 1"
    _, first = query(str(run), sql)
    (run / "iterations" / "1" / "_COMMITTED").unlink()  # as if killed before the commit
    run_iterations(str(run), config)
    assert query(str(run), sql)[1] == first


def test_the_curriculum_offers_band_tasks_of_a_generated_domain_again(tmp_path):
    from flywheel.schemas import TABLES
    from flywheel.schemas.write import write_rows
    rows = []
    for index, passes in ((3, 2), (5, 4), (9, 0)):  # 2/4 and 4/4 ... band is 0.2..0.8: only task 3
        task = f"add-train-{index:06d}"
        for i in range(4):
            row = dict.fromkeys(TABLES["trajectories"].names)
            row.update(run_id="r", iteration=0, domain="add", task_id=task, group_id=task,
                       sample_index=i, policy_version=0, prompt="q", response="a",
                       verdict="pass" if i < passes else "fail", filtered=False)
            rows.append(row)
    write_rows(f"{tmp_path}/tables/trajectories/iteration=0/domain=add/part-00000.parquet",
                  "trajectories", rows)
    config = RunConfig.from_dict({**tiny_config(domains=("add",)).to_dict(),
                                  "steering": {"sampler": "curriculum"}})
    plan = plan_iteration(config, RunLayout(str(tmp_path)), 1, task_ranges(config, 1))
    train = [r for r in plan.ranges if r.split == "train"]
    window = train[0]
    assert (window.start, window.stop) == (4, 8)  # iteration 1's fresh window of 4 tasks
    assert [(r.start, r.stop) for r in train[1:]] == [(3, 4)]  # the band task, offered again
    assert set(plan.sample["history"]) == {"add-train-000003"}
    assert plan.summary["revisits_offered"] == {"add": 1}
