"""Rows of users' task files: JSONL or JSON (optionally gzipped), or Parquet, as bytes from any
filesystem.

Shared by the pipeline's ReadTasks and by `flywheel tasks validate`, so both report a bad row the
same way: `path: line N: problem` (`row N` for Parquet; `item N` for a .json document, an array
of rows as Spider's dev.json or one row as each problem file of MATH). A row that names no
`domain` is read in the published format its fields show (task_formats.py: HumanEval, MBPP,
GSM8K, MATH, Spider-like SQL, SWE-bench) and runs as that format's domain, unless the user named a default
domain (`--domain`).
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator
import os
from typing import Any

from flywheel.domains.task_formats import FormatError, known_formats, recognise

Row = tuple[int, "dict[str, Any] | None", "str | None"]   # (line or row number, row, problem)
FormatRow = tuple[int, "dict[str, Any] | None", "str | None", "str | None"]  # ... + format name


def where(path: str, number: int) -> str:
    if not number:
        return path
    unit = "row" if path.endswith(".parquet") else "item" if _is_json_document(path) else "line"
    return f"{path}: {unit} {number}"


def _is_json_document(path: str) -> bool:
    """A .json file holds one JSON document: an array of rows (Spider's dev.json) or one row
    (each problem file of MATH); numbered as items."""
    return path.removesuffix(".gz").endswith(".json")


def rows_of_file(path: str, data: bytes, default_domain: str | None = None) -> Iterator[Row]:
    """(number, task row or None, problem or None) for every row of one task file's bytes."""
    for number, row, problem, _ in task_rows(path, data, default_domain):
        yield number, row, problem


def task_rows(path: str, data: bytes, default_domain: str | None = None) -> Iterator[FormatRow]:
    """As rows_of_file, with the name of the task format each row was read in (None for a row
    that names its `domain`). A row without one gets its format's domain, or `default_domain`."""
    folder = os.path.dirname(path)
    for number, row, problem in raw_rows(path, data):
        if row is not None and ("_folder" in row or "repo" in row):
            row = _placed(row, folder)
        if row is None or row.get("domain"):
            yield number, row, problem, None
            continue
        fmt, near = recognise(row)
        if fmt is None:
            if default_domain:
                yield number, {**row, "domain": default_domain}, None, None
            else:
                yield number, None, ("field `domain` missing, and " + (near or "the fields match "
                                     "no known task format: " + known_formats())
                                     + "; name the domain in the row or with --domain"), None
            continue
        try:
            task = fmt.to_task(row, folder)
        except (FormatError, KeyError, TypeError, ValueError) as e:
            yield number, None, f"{fmt.title} format: {e}", fmt.name
            continue
        yield number, {**task, "domain": default_domain or fmt.domain}, None, fmt.name


def _placed(row: dict[str, Any], folder: str) -> dict[str, Any]:
    """`row` with `_folder` said by this reader: a `repo` path is read relative to the task file's
    folder (task_paths.py), never to a folder the row itself names."""
    row = {k: v for k, v in row.items() if k != "_folder"}
    return {**row, "_folder": folder} if "repo" in row else row


def raw_rows(path: str, data: bytes) -> Iterator[Row]:
    """(number, row or None, problem or None) for every row of one task file's bytes, as stored."""
    if path.endswith(".parquet"):
        yield from _parquet_rows(data)
        return
    if data[:2] == b"\x1f\x8b":  # still gzipped (Beam's readers usually decompress .gz already)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            yield 0, None, f"not a readable gzip file: {e}"
            return
    if _is_json_document(path):
        yield from _json_document_rows(data)
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


def _json_document_rows(data: bytes) -> Iterator[Row]:
    try:
        document = json.loads(data.decode("utf-8", "replace"))
    except ValueError as e:
        yield 0, None, f"invalid JSON: {e}"
        return
    items = document if isinstance(document, list) else [document]
    for number, row in enumerate(items, start=1):
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
