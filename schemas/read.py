"""The one reader of Flywheel's Hive-partitioned Parquet tables, local or on any pyarrow URI.

    read_table("runs/r/tables/metrics", "metrics")                       # the whole table
    read_table("gs://b/r/tables/trajectories/iteration=3", "trajectories",  # one partition
               columns=["task_id", "domain", "advantage"])

The URI names a table's folder or any partition folder below it; partition keys (`iteration`,
`domain`) come from the path, also those above the folder read, typed as in the logical schema.
Before any row is read, every file's schema major version is checked (`check_file_version`), so a
table written by an incompatible Flywheel fails naming the file instead of with a type error.
The trainer, `flywheel sql` and the reports all read through here; the trainer streams
(`scan_batches`), since an iteration of 100k+ attempts need not fit in memory.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from flywheel.schemas.tables import PARTITION_COLUMNS, TABLES
from flywheel.schemas.storage import resolve_uri
from flywheel.schemas.validation import check_file_metadata, check_version


def table_dataset(uri: str, table: str, missing_ok: bool = True) -> ds.Dataset:
    """`table` under `uri` as one dataset with its logical schema.

    A folder that does not exist is an empty dataset when `missing_ok`, else FileNotFoundError.
    """
    schema = TABLES[table]
    fs, path = resolve_uri(uri)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        if missing_ok:
            return ds.dataset(schema.empty_table())
        raise FileNotFoundError(f"no {table} table at {uri}")
    files = [info.path for info in fs.get_file_info(pafs.FileSelector(path, recursive=True))
             if info.type == pafs.FileType.File and info.path.endswith(".parquet")]
    for file in files:
        check_file_version(fs, file)
    partitioning = ds.partitioning(
        pa.schema([schema.field(c) for c in PARTITION_COLUMNS[table]]), flavor="hive")
    return ds.dataset(sorted(files), format="parquet", filesystem=fs, schema=schema,
                      partitioning=partitioning, partition_base_dir=_table_root(path))


def read_table(uri: str, table: str, columns: list[str] | None = None, filter=None,
               missing_ok: bool = True) -> pa.Table:
    """Rows of `table` under `uri` (see table_dataset); unknown `columns` raise KeyError."""
    _check_columns(table, columns)
    return table_dataset(uri, table, missing_ok).to_table(columns=columns, filter=filter)


def scan_batches(dataset: ds.Dataset, table: str, columns: list[str],
                 batch_size: int = 1024) -> Iterator[pa.RecordBatch]:
    """`columns` of a `table_dataset` as record batches of at most `batch_size` rows, in the
    dataset's order (the same on every scan: files sorted, rows as written), so that a row's
    number in the scan names it across scans. Read-ahead is kept to two batches of one file: the
    memory is a few batches, whatever the table's size."""
    _check_columns(table, columns)
    yield from dataset.to_batches(columns=columns, batch_size=batch_size, batch_readahead=2,
                                  fragment_readahead=1)


def _check_columns(table: str, columns: list[str] | None) -> None:
    unknown = [c for c in columns or () if c not in TABLES[table].names]
    if unknown:
        raise KeyError(f"columns {unknown} not in the {table} table")


def check_file_version(fs: pafs.FileSystem, path: str) -> None:
    """Reject a Parquet file that records a schema major version this code does not read.

    Both records count: the file's `flywheel.schema_version` metadata and every value of its
    `schema_version` column (a file rewritten by another engine may keep only one of them).
    A file with neither is rejected too.
    """
    with fs.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        schema = parquet.schema_arrow
        recorded = b"flywheel.schema_version" in (schema.metadata or {})
        if recorded:
            check_file_metadata(schema, path)
        if "schema_version" in schema.names:
            for version in set(parquet.read(columns=["schema_version"]).column(0).to_pylist()):
                check_version(version, path)
        elif not recorded:
            check_version(None, path)


def _table_root(path: str) -> str:
    """`path` without its trailing `key=value` partition folders: where the Hive paths start."""
    parts = path.rstrip("/").split("/")
    while parts and "=" in parts[-1]:
        parts.pop()
    return "/".join(parts)
