"""Run configuration: round trip through run.json and backend options."""

import json

import pytest

from flywheel.pipelines.config import RunConfig, parse_options


def test_config_round_trips_through_json():
    config = RunConfig()
    assert RunConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_sandbox_options_parse_to_backend_kwargs():
    assert parse_options(("runtime=runsc", "warm=false", "n=3")) == {"runtime": "runsc", "warm": False, "n": 3}
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_options(("runsc",))
