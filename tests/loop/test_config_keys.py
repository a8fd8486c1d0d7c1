"""Every key of the run config: `--set` derived from the dataclasses, checked as the file is (the
generated reference, docs/CONFIG.md, is checked current by tests/loop/test_options.py, in a fresh
process). Nothing here names a single setting's flag: a new field is covered by walking the
fields."""

import dataclasses

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from flywheel.settings.config import RunConfig
from flywheel.loop.config_keys import config_keys, parse_set
from flywheel.loop.options import OLD_FLAGS, RUN_FLAGS, FlywheelOptions

def as_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(as_text, value))
    return "none" if value is None else str(value)


def test_every_key_round_trips_through_set_at_its_default():
    """Each key's default, written as text, is read back by --set to the same value."""
    keys = config_keys()
    assert {k.dotted.partition(".")[0] for k in keys} >= {f.name for f in dataclasses.fields(RunConfig)} - {"seed", "iterations"}
    for key in keys:
        assert parse_set(f"{key.dotted}={as_text(key.default)}") == (key.dotted, key.default), key.dotted
        assert key.comment or any(k == key.dotted for k, _, _ in {**RUN_FLAGS, **OLD_FLAGS}.values()), \
            f"{key.dotted} has no meaning: a comment beside its field"


@pytest.mark.parametrize("item, message", [
    ("train.lr=abc", "`train.lr` must be a number, got 'abc'"),
    ("seed=1.5", "`seed` must be an integer, got '1.5'"),
    ("warm_start.carry_optimizer=maybe", "`warm_start.carry_optimizer` must be true or false"),
    ("train.betas=0.9", "`train.betas` must be an array of 2 values"),
    ("train.epoch=3", "unknown key `train.epoch` (did you mean `train.epochs`?)"),
    ("rollout.max_turns=3", "`rollout.max_turns` is now `episode.max_turns`"),
    ("episode.keep_turns=0", "episode.keep_turns must be >= 1"),
    ("train.lr", "expected SECTION.KEY=VALUE"),
])
def test_a_bad_set_is_one_message_naming_the_key(item, message):
    with pytest.raises((ValueError, KeyError)) as e:
        PipelineOptions(["--set", item]).view_as(FlywheelOptions).run_config()
    assert message in str(e.value)


def test_set_wins_over_flags_and_old_flags_warn_with_their_set_form():
    options = PipelineOptions(["--max-turns", "3", "--context", "cut", "--set", "episode.max_turns=5",
                               "--set", "policy.options=d_model=32,name=\"a, b\""]).view_as(FlywheelOptions)
    config, explicit = options.run_config()
    assert (config.episode.max_turns, config.episode.context) == (5, "cut")
    assert config.policy.options == ("d_model=32", 'name="a, b"')
    assert {"episode.max_turns", "episode.context", "policy.options"} <= explicit
    assert options.deprecated() == ["--context is deprecated and goes in the next release: use "
                                    "--set episode.context=VALUE"]


