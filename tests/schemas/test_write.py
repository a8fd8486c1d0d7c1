"""schemas.write.write_rows, the one table writer: rows in a canonical order, a whole file or none
on local disk (no temporary left), and on gs:// (the GCS emulator) no folder marker objects, which
made every later write below them fail there."""

import os

import pyarrow as pa
import pyarrow.parquet as pq

from flywheel.schemas.storage import read_file
from flywheel.schemas.write import write_rows


def metric(name, value, domain="d"):
    return {"schema_version": "1", "run_id": "r", "iteration": 0, "domain": domain, "name": name,
            "value": value, "policy_version": 0, "created_at": None}


def test_rows_are_written_in_one_order_and_no_temporary_is_left(tmp_path):
    rows = [metric("b", 2.0), metric("a", 1.0, "e"), metric("a", 3.0)]
    path = tmp_path / "tables" / "metrics" / "iteration=0" / "x.parquet"
    write_rows(str(path), "metrics", rows)
    again = tmp_path / "again.parquet"
    write_rows(str(again), "metrics", list(reversed(rows)))
    got = pq.read_table(path).to_pylist()
    assert [(r["domain"], r["name"]) for r in got] == [("d", "a"), ("d", "b"), ("e", "a")]
    assert path.read_bytes() == again.read_bytes()  # the same rows, the same file
    assert os.listdir(path.parent) == ["x.parquet"]


def test_gs_writes_below_one_another_and_read_back(gcs_emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    root, written = "gs://runs/write-rows", []
    for k in range(3):  # each file's folder lies below the last one's: a marker object would block it
        folder = "/".join([root, *(f"level={i}" for i in range(k + 1))])
        written.append(write_rows(f"{folder}/part.parquet", "metrics", [metric(f"m{k}", float(k))]))
    got = [pq.read_table(pa.BufferReader(read_file(uri))).column("name").to_pylist() for uri in written]
    assert got == [["m0"], ["m1"], ["m2"]]
