"""Schemas: rows validate into Parquet files, read back equal, and unknown majors are rejected."""

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flywheel.schemas import (SCHEMA_VERSION, SchemaVersionError, check_file_metadata, check_version,
                              file_schema, rows_to_file_table)


def test_partition_columns_are_not_in_files():
    assert "iteration" not in file_schema("trajectories").names
    assert "domain" not in file_schema("trajectories").names
    assert "domain" in file_schema("metrics").names


def test_rows_round_trip_through_parquet(tmp_path):
    row = {"run_id": "r", "task_id": "t", "group_id": "g", "sample_index": 0, "policy_version": 1,
           "prompt": "1+1=", "prompt_token_ids": [256, 49], "response": "2",
           "response_token_ids": [50, 257], "response_logprobs": [-0.1, -0.2],
           "turns": [{"action": "2", "observation": "", "exit_code": 0, "duration_ms": 1.5}],
           "reward_raw": 1.0, "reward_components": {"correct": 1.0}, "advantage": 0.5,
           "verdict": "pass", "filtered": False, "started_at": dt.datetime.now(dt.timezone.utc)}
    table = rows_to_file_table("trajectories", [row])
    pq.write_table(table, tmp_path / "x.parquet")
    back = pq.read_table(tmp_path / "x.parquet")
    check_file_metadata(back.schema, "x.parquet")
    got = back.to_pylist()[0]
    assert got["schema_version"] == SCHEMA_VERSION
    assert got["reward_components"] == [("correct", 1.0)]
    assert got["turns"][0]["exit_code"] == 0


def test_wrong_type_is_rejected():
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, TypeError)):
        rows_to_file_table("metrics", [{"name": "x", "value": "not a number"}])


def test_unknown_major_version_is_rejected_with_a_clear_message():
    check_version("1.7", "f.parquet")  # a newer minor only adds nullable columns
    with pytest.raises(SchemaVersionError, match=r"f.parquet: schema version 2.0 .*major version 1"):
        check_version("2.0", "f.parquet")
    with pytest.raises(SchemaVersionError, match="no Flywheel schema version"):
        check_version(None, "g.parquet")
