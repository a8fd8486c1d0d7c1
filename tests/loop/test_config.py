"""Run configuration: round trip through run.json, run.json files written before the
`[algorithm]` table, and backend options."""

import json

import pytest

from flywheel.loop.config import RunConfig, parse_options
from flywheel.loop.driver import RunConfigMismatch, open_run
from flywheel.loop.layout import RunLayout
from flywheel.trainer.algorithm import Algorithm


def test_config_round_trips_through_json():
    config = RunConfig()
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_sandbox_options_parse_to_backend_kwargs():
    assert parse_options(("runtime=runsc", "warm=false", "n=3")) == {"runtime": "runsc", "warm": False, "n": 3}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_options(("runsc",))


OLD_RUN_CONFIG = {  # the config of a run.json written before [algorithm] (abridged: defaults fill in)
    "seed": 0, "iterations": 2,
    "rollout": {"n_samples": 4, "advantage": "rloo", "turn_discount": 0.9},
    "train": {"lr": 1e-4, "loss": "dapo", "credit": "turn"},
}


def test_a_run_json_from_before_the_algorithm_table_still_loads():
    config = RunConfig.from_dict(json.loads(json.dumps(OLD_RUN_CONFIG)))
    assert config.algorithm == Algorithm(advantage="rloo", credit="turn", discount=0.9, loss="dapo")
    assert config.rollout.n_samples == 4 and config.train.lr == 1e-4
    assert "loss" not in config.to_dict()["train"] and "advantage" not in config.to_dict()["rollout"]
    with pytest.raises(ValueError, match="`train.loss` moved to `algorithm.loss`"):
        RunConfig.from_dict({"train": {"loss": "dapo"}, "algorithm": {"loss": "grpo"}})


def test_an_old_run_resumes_with_the_algorithm_it_was_started_with(tmp_path):
    layout = RunLayout(str(tmp_path / "run"))
    layout.write_json(layout.run_json, {"run_id": "run", "config": OLD_RUN_CONFIG})
    asked = RunConfig(iterations=3, algorithm=Algorithm(loss="dapo"))
    config, _ = open_run(layout, asked, {"iterations", "algorithm.loss"})
    assert config.iterations == 3 and config.algorithm.credit == "turn"
    with pytest.raises(RunConfigMismatch, match="algorithm.loss='dapo', not 'grpo'"):
        open_run(layout, RunConfig(), {"algorithm.loss"})
