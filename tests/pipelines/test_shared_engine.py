"""One model handler for Generate and every Turn stage: a rollout mixing single- and multi-turn
domains starts one engine per worker and loads each checkpoint's weights once; a checkpoint with
the weights already running loads nothing (counters `engine_starts`, `weight_loads`)."""

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.layout import RunLayout
from flywheel.pipelines.rollout import IterationSpec, run_rollout
from flywheel.policy.checkpoint import save_checkpoint
from flywheel.policy.backends import create_policy
from flywheel.transforms.policy_model import close_worker_model

from tests.run_configs import tiny_config


def counts(result) -> dict:
    return {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]
            if c.key.metric.name in ("engine_starts", "weight_loads", "episode_turns")}


def rollout(config, tmp_path, name: str, checkpoint: str) -> dict:
    layout = RunLayout(str(tmp_path / name))
    result = run_rollout(config, IterationSpec(name, 0, 0, checkpoint), layout, PipelineOptions([]))
    domains = {r["domain"] for r in layout.read_table("trajectories").to_pylist()}
    assert domains == set(config.rollout.domains)
    return counts(result)


@pytest.mark.slow  # three rollouts
def test_generate_and_turns_share_one_engine_and_one_load(tmp_path):
    config = tiny_config(domains=("add", "fix_function"), tasks_per_domain=1,
                         heldout_per_domain=0, n_samples=2)
    options = config.policy.parsed_options()
    for name, seed in (("a", 1), ("same", 1), ("b", 2)):
        save_checkpoint(str(tmp_path / name), create_policy("tiny", options, seed=seed), None,
                        {"policy_version": 0})
    close_worker_model()  # this test process's worker starts with no engine
    try:
        first = rollout(config, tmp_path, "run-a", str(tmp_path / "a"))
        assert first["episode_turns"] > 0  # Turn stages ran beside Generate
        assert (first["engine_starts"], first["weight_loads"]) == (1, 1)
        same = rollout(config, tmp_path, "run-same", str(tmp_path / "same"))  # the same digest
        assert (same.get("engine_starts", 0), same.get("weight_loads", 0)) == (0, 0)
        other = rollout(config, tmp_path, "run-b", str(tmp_path / "b"))
        assert (other.get("engine_starts", 0), other["weight_loads"]) == (0, 1)
    finally:
        close_worker_model()
