"""Reading a run's tables back: pyarrow datasets over the Hive partitions, version-checked.

Every file's recorded schema version is checked before any row is read, so a table written by an
incompatible Flywheel fails with a message naming the file instead of a confusing type error.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flywheel.schemas import PARTITION_COLUMNS, TABLES, check_file_metadata
from flywheel.trainer.uris import resolve_uri


def table_dataset(run_dir: str, table: str) -> ds.Dataset:
    """The whole `table` of a run as one dataset with its logical schema (empty if none yet)."""
    fs, root = resolve_uri(run_dir)
    path = f"{root.rstrip('/')}/tables/{table}"
    schema = TABLES[table]
    partitioning = ds.partitioning(
        pa.schema([schema.field(c) for c in PARTITION_COLUMNS[table]]), flavor="hive")
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return ds.dataset(schema.empty_table())
    check_versions(fs, path)
    return ds.dataset(path, format="parquet", filesystem=fs, partitioning=partitioning,
                      schema=schema)


def check_versions(fs: pafs.FileSystem, path: str) -> None:
    """Reject the first Parquet file under `path` whose schema major version is unknown."""
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        if info.type == pafs.FileType.File and info.path.endswith(".parquet"):
            with fs.open_input_file(info.path) as f:
                check_file_metadata(pq.read_schema(f), info.path)


def read_table(run_dir: str, table: str, filter=None) -> pa.Table:
    return table_dataset(run_dir, table).to_table(filter=filter)
