"""Rows of users' task files: JSONL (optionally gzipped) or Parquet, as bytes from any filesystem.

Shared by the pipeline's ReadTasks and by `flywheel tasks validate`, so both report a bad row the
same way: `path: line N: problem` (`row N` for Parquet).
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
from typing import Any

Row = tuple[int, "dict[str, Any] | None", "str | None"]   # (line or row number, row, problem)


def where(path: str, number: int) -> str:
    if not number:
        return path
    return f"{path}: {'row' if path.endswith('.parquet') else 'line'} {number}"


def rows_of_file(path: str, data: bytes) -> Iterator[Row]:
    """(number, row or None, problem or None) for every row of one task file's bytes."""
    if path.endswith(".parquet"):
        yield from _parquet_rows(data)
        return
    if data[:2] == b"\x1f\x8b":  # still gzipped (Beam's readers usually decompress .gz already)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            yield 0, None, f"not a readable gzip file: {e}"
            return
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            yield number, None, f"invalid JSON: {e}"
            continue
        if isinstance(row, dict):
            yield number, row, None
        else:
            yield number, None, f"expected a JSON object, got {type(row).__name__}"


def _parquet_rows(data: bytes) -> Iterator[Row]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as e:
        yield 0, None, f"not a readable Parquet file: {e}"
        return
    for number, row in enumerate(table.to_pylist(), start=1):
        # Tasks are JSON data wherever they come from: a timestamp, decimal or bytes cell becomes
        # its text, as it would be written in a JSONL task file.
        row = json.loads(json.dumps({k: v for k, v in row.items() if v is not None}, default=str))
        yield number, row, None
