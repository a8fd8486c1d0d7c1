"""WriteTables: rows into Hive-partitioned Parquet files through Beam's FileSystems.

One file per (partition, shard), named deterministically, rows sorted: rewriting an iteration
produces the same files, never duplicates. (fileio.WriteToFiles silently drops files whose names
hold `key=value/` directories on local disk, see FIELD_NOTES; so partitions are grouped and each
written with pyarrow here.)
"""

from __future__ import annotations

import os
import zlib

import apache_beam as beam
import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from flywheel.transforms.gcs_credentials import anonymous_for_emulator

from flywheel.schemas import PARTITION_COLUMNS, rows_to_file_table
from flywheel.transforms.errors import count

SORT_KEYS = ("domain", "task_id", "sample_index", "stage", "name")


def partition_dir(root: str, table: str, row: dict) -> str:
    parts = [f"{col}={row[col]}" for col in PARTITION_COLUMNS[table]]
    return FileSystems.join(root, "tables", table, *parts)


def write_parquet(path: str, table: str, rows: list[dict]) -> str:
    """Write `rows` as one Parquet file of `table` at `path` (local or gs://...)."""
    rows = sorted(rows, key=lambda r: tuple(str(r.get(k)) for k in SORT_KEYS))
    arrow = rows_to_file_table(table, rows)
    if "://" not in path:  # object stores have no directories; local disk needs them first
        os.makedirs(os.path.dirname(path), exist_ok=True)
    with FileSystems.create(path) as f:
        pq.write_table(arrow, f, compression="zstd")
    return path


class _WritePartition(beam.DoFn):
    def __init__(self, root: str, table: str, prefix: str = "part"):
        self.root, self.table, self.prefix = root, table, prefix

    def setup(self):
        anonymous_for_emulator()

    def process(self, keyed):
        (directory, shard), rows = keyed
        rows = list(rows)
        path = FileSystems.join(directory, f"{self.prefix}-{shard:05d}.parquet")
        write_parquet(path, self.table, rows)
        count(f"rows_{self.table}", len(rows))
        yield path


class WriteTable(beam.PTransform):
    """Rows of one table in, the paths of the written files out. Files are named PREFIX-SHARD:
    a writer of its own prefix (one evaluation among several) rewrites only its own files."""

    def __init__(self, root: str, table: str, num_shards: int = 1, prefix: str = "part"):
        super().__init__()
        self.root, self.table, self.num_shards, self.prefix = root, table, num_shards, prefix

    def _key(self, row):
        shard = zlib.crc32(str(row.get("task_id")).encode()) % self.num_shards
        return (partition_dir(self.root, self.table, row), shard), row

    def expand(self, rows):
        return (rows
                | "Key" >> beam.Map(self._key)
                | "Group" >> beam.GroupByKey()
                | "Write" >> beam.ParDo(_WritePartition(self.root, self.table, self.prefix)))
