"""WriteTables: rows into Hive-partitioned Parquet files, one file per (partition, shard).

Files are named deterministically and their rows sorted (schemas.write.write_rows, the one table
writer): rewriting an iteration produces the same files, never duplicates. (fileio.WriteToFiles
silently drops files whose names hold `key=value/` directories on local disk, see FIELD_NOTES;
so partitions are grouped and each written with pyarrow.)
"""

from __future__ import annotations

import zlib

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from flywheel.schemas import PARTITION_COLUMNS
from flywheel.schemas.write import write_rows
from flywheel.transforms.errors import count


def partition_dir(root: str, table: str, row: dict) -> str:
    parts = [f"{col}={row[col]}" for col in PARTITION_COLUMNS[table]]
    return FileSystems.join(root, "tables", table, *parts)


class _WritePartition(beam.DoFn):
    def __init__(self, root: str, table: str, prefix: str = "part"):
        self.root, self.table, self.prefix = root, table, prefix

    def process(self, keyed):
        (directory, shard), rows = keyed
        rows = list(rows)
        path = FileSystems.join(directory, f"{self.prefix}-{shard:05d}.parquet")
        write_rows(path, self.table, rows)
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
