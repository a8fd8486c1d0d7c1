"""Readers of a run's tables reject files written with an unknown schema major version."""

import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flywheel.pipelines.tables_read import read_table
from flywheel.schemas import SchemaVersionError, file_schema, rows_to_file_table
from flywheel.trainer.trajectory_batches import read_trajectories


def write_metrics(path, version):
    table = rows_to_file_table("metrics", [{"run_id": "r", "domain": "*", "name": "x", "value": 1.0}])
    meta = {**file_schema("metrics").metadata, b"flywheel.schema_version": version.encode()}
    table = table.replace_schema_metadata(meta).set_column(
        0, "schema_version", pa.array([version] * table.num_rows))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_known_major_reads_unknown_major_is_rejected_naming_the_file(tmp_path):
    write_metrics(tmp_path / "tables/metrics/iteration=0/part-00000.parquet", "1.3")
    assert read_table(str(tmp_path), "metrics").num_rows == 1
    bad = tmp_path / "tables/metrics/iteration=1/part-00000.parquet"
    write_metrics(bad, "2.0")
    with pytest.raises(SchemaVersionError, match=rf"{bad}: schema version 2.0 .*major version 1"):
        read_table(str(tmp_path), "metrics")
    out = subprocess.run(["flywheel", "sql", "SELECT count(*) FROM metrics", "--run-dir", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "schema version 2.0" in out.stdout + out.stderr


def test_the_trainer_rejects_unknown_majors_too(tmp_path):
    table = rows_to_file_table("trajectories", [{"task_id": "t", "schema_version": "9.0"}])
    path = tmp_path / "iteration=0/domain=add/part-00000.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table, path)
    with pytest.raises(SchemaVersionError, match="9.0"):
        read_trajectories(str(tmp_path / "iteration=0"))

