"""One Parquet file of a table from row dicts, without Beam: Beam's WriteTable, the driver's
metrics and the commands that write tables outside a pipeline (`flywheel import`, `flywheel
serve`'s recorder, the review page)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import pyarrow.parquet as pq

from flywheel.schemas import storage
from flywheel.schemas.tables import PARTITION_COLUMNS
from flywheel.schemas.validation import rows_to_file_table


def table_file(root: str, table: str, row: Mapping, prefix: str = "part") -> str:
    """A new file's URI for `row`'s partition of `table` under the folder `root` (a run dir or
    any folder of tables): root/tables/<table>/<col>=<value>/<prefix>-<uuid>.parquet."""
    parts = [f"{col}={row[col]}" for col in PARTITION_COLUMNS[table]]
    return "/".join([root.rstrip("/"), "tables", table, *parts,
                     f"{prefix}-{uuid.uuid4().hex[:16]}.parquet"])


# The order rows are written in (a stable sort: rows without these keys keep theirs), so that
# the same rows make the same file, whichever worker or process wrote them.
SORT_KEYS = ("domain", "task_id", "sample_index", "stage", "name")


def write_rows(uri: str, table: str, rows: Iterable[Mapping]) -> str:
    """Write `rows` (validated against `table`'s schema) as one Parquet file at `uri`, local or
    gs://, in SORT_KEYS order, whole or not at all (storage.write_whole), so a reader never sees
    half a file. The one table writer: Beam's WriteTable, the driver's metrics, import, serve
    and review all call it."""
    rows = sorted(rows, key=lambda r: tuple(str(r.get(k)) for k in SORT_KEYS))
    arrow = rows_to_file_table(table, rows)
    storage.write_whole(uri, lambda f: pq.write_table(arrow, f, compression="zstd"))
    return uri


def write_partitioned(root: str, table: str, rows: Iterable[Mapping], prefix: str = "part"
                      ) -> list[str]:
    """`rows` written under `root` as one file per partition of `table`; the files' URIs."""
    groups: dict[tuple, list[Mapping]] = {}
    for row in rows:
        groups.setdefault(tuple(str(row[c]) for c in PARTITION_COLUMNS[table]), []).append(row)
    return [write_rows(table_file(root, table, group[0], prefix), table, group)
            for group in groups.values()]
