"""The attempt record: its coder round-trips every field, deterministically, and Beam uses it."""

import datetime as dt

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from flywheel.sandbox import ExecResult
from flywheel.schemas import TRAJECTORIES
from flywheel.records.attempt import Attempt
from flywheel.transforms.attempt_coder import AttemptCoder


def attempt(**changes) -> Attempt:
    base = Attempt("run", 2, 2, "train", "add", "add-train-000001", "2/train/add-train-000001", 3,
                   "17+5=", {"answer": "22", "meta": {"b": [1, 2], "a": None}}, 1.0, 12, 2**62)
    return base.replace(**changes)


def full() -> Attempt:
    return attempt(prompt_token_ids=[256, 49], response="22", response_token_ids=[50, 50, 257],
                   response_logprobs=[-0.5, -0.25, -0.125], finish_reason="stop",
                   started_at=dt.datetime(2026, 12, 3, 7, 0, 0, 123456, tzinfo=dt.timezone.utc),
                   execution=ExecResult(0, "22\n", "", False, False, None, 3.5, 2.0, "local"),
                   turns=[{"action": "22", "observation": "22\n", "exit_code": 0, "duration_ms": 3.5}],
                   reward_raw=1.0, verdict="pass", reward_components={"correct": 1.0},
                   advantage=0.5, filtered=False)


def test_the_coder_round_trips_every_field_and_is_deterministic():
    coder = AttemptCoder()
    for a in (attempt(), full()):
        assert coder.decode(coder.encode(a)) == a
    reordered = full().replace(task={"meta": {"a": None, "b": [1, 2]}, "answer": "22"})
    assert coder.encode(reordered) == coder.encode(full())
    assert coder.is_deterministic()
    assert isinstance(beam.coders.registry.get_coder(Attempt), AttemptCoder)


def test_the_row_holds_exactly_the_trajectory_columns_it_has():
    row = full().row()
    assert set(row) == set(TRAJECTORIES.names) - {"schema_version"}
    assert row["sampling_temperature"] == 1.0 and row["response_token_ids"] == [50, 50, 257]


def test_attempts_cross_a_group_by_key_intact():
    attempts = [full().replace(sample_index=i) for i in range(4)]
    with TestPipeline() as p:
        grouped = (p | beam.Create(attempts) | beam.Map(lambda a: (a.group_id, a))
                   | beam.GroupByKey() | beam.FlatMap(lambda kv: sorted(kv[1], key=lambda a: a.sample_index)))
        assert_that(grouped, equal_to(attempts))
