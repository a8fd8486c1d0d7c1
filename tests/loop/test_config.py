"""Run configuration: round trip through run.json, run.json files written before keys moved
(refused, naming the new home), and backend options."""

import json

import pytest

from flywheel.settings.config import RunConfig, parse_options
from flywheel.loop.driver import RunConfigMismatch, open_run
from flywheel.settings.layout import RunLayout
from flywheel.trainer.algorithm import Algorithm


def test_config_round_trips_through_json():
    config = RunConfig()
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_sandbox_options_parse_to_backend_kwargs():
    assert parse_options(("runtime=runsc", "warm=false", "n=3")) == {"runtime": "runsc", "warm": False, "n": 3}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_options(("runsc",))


OLD_RUN_CONFIG = {  # the config of a run.json written before [algorithm] and [episode] (abridged)
    "seed": 0, "iterations": 2,
    "rollout": {"n_samples": 4, "advantage": "rloo", "turn_discount": 0.9, "max_turns": 3},
    "train": {"lr": 1e-4, "loss": "dapo", "credit": "turn"},
}


@pytest.mark.parametrize("table, key, new", [("rollout", "advantage", "algorithm.advantage"),
                                             ("train", "loss", "algorithm.loss"),
                                             ("rollout", "max_turns", "episode.max_turns"),
                                             ("rollout", "episode_tokens", "episode.tokens")])
def test_a_key_that_moved_is_refused_naming_its_new_home(table, key, new):
    """No key is read silently from where it was: a run.json written before a move says what to rename."""
    with pytest.raises(ValueError, match=f"`{table}.{key}` is now `{new}`"):
        RunConfig.from_dict({"seed": 0, table: {key: 1}})


def test_an_old_run_is_refused_naming_the_moved_key(tmp_path):
    layout = RunLayout(str(tmp_path / "run"))
    layout.write_json(layout.run_json, {"run_id": "run", "config": OLD_RUN_CONFIG})
    with pytest.raises(RunConfigMismatch, match="run.json: `rollout.advantage` is now `algorithm"):
        open_run(layout, RunConfig(iterations=3), {"iterations"})
    moved = {**OLD_RUN_CONFIG, "rollout": {"n_samples": 4}, "train": {"lr": 1e-4},
             "algorithm": {"advantage": "rloo", "discount": 0.9, "loss": "grpo", "credit": "turn"},
             "episode": {"max_turns": 3}}
    layout.write_json(layout.run_json, {"run_id": "run", "config": moved})
    config, _ = open_run(layout, RunConfig(iterations=3), {"iterations"})
    assert config.iterations == 3 and config.algorithm.credit == "turn" and config.episode.max_turns == 3
    with pytest.raises(RunConfigMismatch, match="algorithm.loss='grpo', not 'dapo'"):
        open_run(layout, RunConfig(algorithm=Algorithm(loss="dapo")), {"algorithm.loss"})
