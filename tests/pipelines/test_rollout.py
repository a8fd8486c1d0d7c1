"""The rollout pipeline for real on the DirectRunner: Parquet read back, errors as rows."""

import json

import pytest

from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.schemas import validate_table

from tests.run_configs import tiny_config

from flywheel.domains.registry import DEFAULT_DOMAINS as DOMAINS


def rollout(run_dir, config, beam_args=()):
    spec = IterationSpec("test-run", 0, policy_version=0, checkpoint_uri=None)
    result = run_rollout(config, spec, RunLayout(str(run_dir)), PipelineOptions(list(beam_args)))
    return {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}


def check_tables(run_dir, config):
    trajectories = RunLayout(str(run_dir)).read_table("trajectories")
    validate_table("trajectories", trajectories)
    rows = trajectories.to_pylist()
    r = config.rollout
    assert len(rows) == len(DOMAINS) * r.tasks_per_domain * r.n_samples
    keys = {(row["iteration"], row["task_id"], row["sample_index"]) for row in rows}
    assert len(keys) == len(rows)
    assert {row["domain"] for row in rows} == set(DOMAINS)
    for row in rows:
        assert row["verdict"] in ("pass", "fail", "error")
        assert len(row["response_logprobs"]) == len(row["response_token_ids"]) > 0
        if row["domain"] == "pyexpr":  # really executed in the sandbox
            assert row["sandbox_backend"] == "local" and row["turns"][0]["exit_code"] is not None
        assert row["filtered"] == (row["filter_reason"] is not None)
    metrics = RunLayout(str(run_dir)).read_table("metrics")
    validate_table("metrics", metrics)
    names = {(m["domain"], m["name"]) for m in metrics.to_pylist()}
    for d in (*DOMAINS, "*"):
        assert (d, "heldout_pass@1") in names and (d, "train_pass_rate") in names
    return rows


def test_rollout_in_memory_writes_partitioned_parquet(tmp_path):
    config = tiny_config()
    counters = rollout(tmp_path, config)
    rows = check_tables(tmp_path, config)
    assert counters["attempts_train"] == len(rows)
    assert counters["attempts_heldout"] == len(DOMAINS) * config.rollout.heldout_per_domain
    parts = sorted(p.relative_to(tmp_path).as_posix()
                   for p in (tmp_path / "tables" / "trajectories").rglob("*.parquet"))
    assert parts == [f"tables/trajectories/iteration=0/domain={d}/part-00000.parquet" for d in DOMAINS]


def test_rollout_multi_processing_with_backend_options(tmp_path):
    config = tiny_config(sandbox_options=("warm=false",))   # the cold bwrap path of `local`
    rollout(tmp_path, config, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    check_tables(tmp_path, config)


def test_bad_tasks_and_verifier_exceptions_become_error_rows(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    lines = [
        {"task_id": "ok-1", "domain": "add", "prompt": "1+2=", "answer": "3"},
        {"task_id": "no-prompt", "domain": "add", "answer": "3"},
        "this is not json",
        {"task_id": "bad-domain", "domain": "nope", "prompt": "x", "answer": "y"},
        {"task_id": "bad-answer", "domain": "add", "prompt": "1+1=", "answer": "two"},
        {"task_id": "long", "domain": "add", "prompt": "x" * 300 + " 1+2=", "answer": "3"},
    ]
    tasks.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    config = tiny_config(domains=("add",), task_files=(str(tasks),), tasks_per_domain=2)
    counters = rollout(tmp_path / "run", config)
    errors = RunLayout(str(tmp_path / "run")).read_table("errors")
    validate_table("errors", errors)
    errors = errors.to_pylist()
    by_stage = {(e["stage"], e["kind"]) for e in errors}
    assert ("read_tasks", "input") in by_stage and ("verify", "environment") in by_stage
    messages = "\n".join(e["message"] for e in errors)
    assert f"{tasks}: line 2: field `prompt` missing" in messages
    assert f"{tasks}: line 3: invalid JSON" in messages
    assert f"{tasks}: line 4: field `domain`: unknown domain 'nope'" in messages
    # the run went on: good tasks have rows, and the bad-answer attempts kept theirs, flagged
    rows = RunLayout(str(tmp_path / "run")).read_table("trajectories").to_pylist()
    by_task = {}
    for row in rows:
        by_task.setdefault(row["task_id"], []).append(row)
    assert len(by_task["ok-1"]) == config.rollout.n_samples
    assert len(by_task["long"]) == config.rollout.n_samples   # left-truncated to fit the context
    assert counters["prompts_truncated"] == config.rollout.n_samples
    assert by_task["long"][0]["prompt"].endswith(" 1+2=") and len(by_task["long"][0]["prompt"]) == 305
    assert all(r["verdict"] == "error" and r["filter_reason"] == "verifier_error"
               for r in by_task["bad-answer"])
    assert counters["errors_input"] == 3 and counters["errors_environment"] == config.rollout.n_samples


def _old_task_specs(config, iteration):
    """task_specs as it was before the ranges: every (domain, split, index) listed by the driver."""
    r = config.rollout
    start = iteration * r.tasks_per_domain
    specs = [(d, "train", i) for d in r.domains for i in range(start, start + r.tasks_per_domain)]
    specs += [(d, "heldout", i) for d in r.domains for i in range(r.heldout_per_domain)]
    return specs


def test_task_ranges_expand_on_the_workers_to_the_tasks_the_old_list_gave():
    """A few ranges, cut into chunks and expanded in the pipeline, give the same task rows (ids,
    prompts, answers: the same seeds) as the old per-task list, and the graph holds no index."""
    import apache_beam as beam
    from apache_beam.testing.test_pipeline import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to

    from flywheel.pipelines.rollout import task_ranges
    from flywheel.transforms.tasks import ReadTasks, _GenerateTask

    config = tiny_config(tasks_per_domain=7, heldout_per_domain=5)
    iteration = 2
    ranges = task_ranges(config, iteration)
    assert len(ranges) == 2 * len(DOMAINS)  # one per domain and split, whatever the task count
    old = [t for spec in _old_task_specs(config, iteration)
           for t in _GenerateTask(config.seed, 1 << 20).process(spec)]
    assert len(old) == len(DOMAINS) * 12 and old[0]["task_id"].endswith("-train-000014")
    with TestPipeline() as p:
        read = p | ReadTasks(ranges=ranges, seed=config.seed, chunk_tasks=3)
        assert_that(read["tasks"], equal_to(old))
        assert_that(read["errors"] | beam.combiners.Count.Globally(), equal_to([0]),
                    label="NoErrors")
