"""The one table reader: partitions from the path at any depth, and unknown schema majors rejected
(by `flywheel sql` and the trainer alike), naming the file."""

import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flywheel.schemas import SchemaVersionError, file_schema, read_table, rows_to_file_table


def write(path, table_name, rows, version=None):
    table = rows_to_file_table(table_name, rows)
    if version is not None:
        meta = {**file_schema(table_name).metadata, b"flywheel.schema_version": version.encode()}
        table = table.replace_schema_metadata(meta).set_column(
            0, "schema_version", pa.array([version] * table.num_rows))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def metrics_row():
    return {"run_id": "r", "domain": "*", "name": "x", "value": 1.0}


def test_known_major_reads_unknown_major_is_rejected_naming_the_file(tmp_path):
    write(tmp_path / "tables/metrics/iteration=0/part-00000.parquet", "metrics", [metrics_row()], "1.3")
    assert read_table(str(tmp_path / "tables/metrics"), "metrics").num_rows == 1
    bad = tmp_path / "tables/metrics/iteration=1/part-00000.parquet"
    write(bad, "metrics", [metrics_row()], "2.0")
    with pytest.raises(SchemaVersionError, match=rf"{bad}: schema version 2.0 .*major version 1"):
        read_table(str(tmp_path / "tables/metrics"), "metrics")
    out = subprocess.run(["flywheel", "sql", "SELECT count(*) FROM metrics", "--run-dir", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "schema version 2.0" in out.stdout + out.stderr


def test_a_file_without_metadata_is_judged_by_its_version_column(tmp_path):
    table = rows_to_file_table("trajectories", [{"task_id": "t", "schema_version": "9.0"}])
    path = tmp_path / "iteration=0/domain=add/part-00000.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(table.replace_schema_metadata({}), path)  # as another engine might rewrite it
    with pytest.raises(SchemaVersionError, match="9.0"):
        read_table(str(tmp_path / "iteration=0"), "trajectories")


def test_partitions_come_from_the_path_also_above_the_folder_read(tmp_path):
    root = tmp_path / "trajectories"
    rows = [{"task_id": f"t{i}", "sample_index": i} for i in range(6)]
    write(root / "iteration=3" / "domain=add" / "part-00000.parquet", "trajectories", rows[:5])
    write(root / "iteration=3" / "domain=7" / "part-00000.parquet", "trajectories", rows[5:])
    write(root / "iteration=4" / "domain=add" / "part-00000.parquet", "trajectories", rows[:1])

    one = read_table((root / "iteration=3").as_uri() + "/", "trajectories",
                     columns=["task_id", "domain", "iteration"], missing_ok=False)
    assert one.column_names == ["task_id", "domain", "iteration"] and one.num_rows == 6
    assert sorted(set(one.column("domain").to_pylist())) == ["7", "add"]  # a numeric-looking domain stays a string
    assert set(one.column("iteration").to_pylist()) == {3}
    both = read_table(str(root), "trajectories")
    assert both.num_rows == 7 and set(both.column("iteration").to_pylist()) == {3, 4}
    assert both.schema.field("prompt_token_ids").type == pa.list_(pa.int32())
    with pytest.raises(FileNotFoundError):
        read_table(str(root / "iteration=9"), "trajectories", missing_ok=False)
    assert read_table(str(root / "iteration=9"), "trajectories").num_rows == 0
    (root / "iteration=5").mkdir()
    assert read_table(str(root / "iteration=5"), "trajectories", columns=["advantage"]).num_rows == 0
    with pytest.raises(KeyError, match="nope"):
        read_table(str(root), "trajectories", columns=["nope"])
