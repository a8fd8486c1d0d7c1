"""`--init-checkpoint`: a run starts from a given checkpoint (an SFT output, another run's)."""

import dataclasses

import pytest

from flywheel.settings.config import PolicySpec
from flywheel.loop.driver import RunConfigMismatch, run_iterations
from flywheel.settings.layout import RunLayout
from flywheel.policy.checkpoint import load_checkpoint, recorded_digest

from tests.run_configs import tiny_config

pytestmark = pytest.mark.slow


def test_a_run_starts_from_the_given_checkpoint_without_a_warm_start(tmp_path):
    config = dataclasses.replace(tiny_config(domains=("add",)), iterations=1)
    first = RunLayout(str(tmp_path / "first"))
    run_iterations(first.root, config)
    source = first.checkpoint(0)
    events = []
    second = RunLayout(str(tmp_path / "second"))
    run_iterations(second.root, dataclasses.replace(
        config, policy=dataclasses.replace(config.policy, init_checkpoint=source)),
        explicit={"policy.init_checkpoint"}, event=lambda name, data: events.append(name))
    assert "warm_start_begin" not in events and "init_checkpoint" in events
    assert recorded_digest(second.checkpoint(None)) == recorded_digest(source)
    initial = load_checkpoint(second.checkpoint(None))
    assert initial.optimizer_state is None and initial.meta["init_checkpoint"] == source
    assert second.read_json(second.initial_marker())["init_checkpoint"] == source


def test_a_checkpoint_of_another_backend_is_refused(tmp_path):
    config = dataclasses.replace(tiny_config(domains=("add",)), iterations=1)
    first = RunLayout(str(tmp_path / "first"))
    run_iterations(first.root, config)
    wrong = dataclasses.replace(config, policy=PolicySpec(backend="hf", model="tiny-llama",
                                                          init_checkpoint=first.checkpoint(0)))
    with pytest.raises(RunConfigMismatch, match="'tiny' policy"):
        run_iterations(str(tmp_path / "second"), wrong, explicit={"policy.init_checkpoint"})
