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

import codecs
import gzip
import io
import json
import zlib
from collections.abc import Iterator
import os
from typing import Any

from flywheel.domains.task_formats import FormatError, known_formats, recognise
from flywheel.domains.task_paths import PathError
from flywheel.registry import Registry

Row = tuple[int, "dict[str, Any] | None", "str | None"]   # (line or row number, row, problem)
FormatRow = tuple[int, "dict[str, Any] | None", "str | None", "str | None"]  # ... + format name


# Files read by name rather than as rows (a Harbor task folder's `task.toml`: the reader reads
# the folder around it); a family registers its reader with `@task_file_reader(NAME)`.
FILE_READERS: Registry = Registry("task file reader", home=("flywheel.families.*",))


def task_file_reader(name: str):
    """Decorator: files named `name` are read by `reader(path, data)`, which yields Rows."""
    def register(reader):
        FILE_READERS.register(name, reader)
        return reader
    return register


def expand_pattern(pattern: str) -> list[str]:
    """A task pattern as file patterns: a local folder becomes the files in it, or in its
    subfolders, that a registered reader reads by name (a task folder, or a folder of task
    folders); any other pattern is itself."""
    if "://" in pattern or not os.path.isdir(pattern):
        return [pattern]
    names = [name for name, _ in FILE_READERS.items()]
    here = [os.path.join(pattern, n) for n in names if os.path.isfile(os.path.join(pattern, n))]
    return here or [os.path.join(pattern, "*", n) for n in names]


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
    name = os.path.basename(path)
    named = FILE_READERS.get(name) if name in FILE_READERS else None
    for number, row, problem in (named(path, data) if named else raw_rows(path, data)):
        if row is not None and ("_folder" in row or "repo" in row):
            row = _placed(row, folder)
        if row is None or row.get("domain"):
            yield number, row, problem, None
            continue
        fmt, near = recognise(row)  # total: a format's checks read only the types they test
        if fmt is None:
            if default_domain:
                yield number, {**row, "domain": default_domain}, None, None
            else:
                yield number, None, ("field `domain` missing, and " + (near or "the fields match "
                                     "no known task format: " + known_formats())
                                     + "; name the domain in the row or with --domain"), None
            continue
        try:
            task = fmt.read(row, folder)
        except (FormatError, PathError) as e:  # a path out of the folder names its field
            yield number, None, f"{fmt.title} format: {e}", fmt.name
            continue
        except Exception as e:  # a shape no check foresaw: the row's problem, never the file's
            yield number, None, f"{fmt.title} format: cannot read the row ({type(e).__name__}: {e})", fmt.name
            continue
        yield number, {**task, "domain": default_domain or fmt.domain}, None, fmt.name


MAX_DEPTH = 64
"""How deeply a row's values may nest: deeper rows are refused where they are read, so no later
step (json.dumps of an error row's payload, pickling between Beam workers) recurses too far."""


def _placed(row: dict[str, Any], folder: str) -> dict[str, Any]:
    """`row` with `_folder` said by this reader: a `repo` path is read relative to the task file's
    folder (task_paths.py), never to a folder the row itself names."""
    row = {k: v for k, v in row.items() if k != "_folder"}
    return {**row, "_folder": folder} if "repo" in row else row


def raw_rows(path: str, data: bytes) -> Iterator[Row]:
    """(number, row or None, problem or None) for every row of one task file's bytes, as stored.

    Total: whatever the bytes, every row is yielded or a problem naming its line, and the lines
    after a bad one are read. Lines end at b"\n" only (a JSON string may hold U+2028 or a form
    feed, which str.splitlines would break on); a line that is not UTF-8 is a problem of its own."""
    if path.endswith(".parquet"):
        yield from _parquet_rows(data)
        return
    if data[:2] == b"\x1f\x8b":  # still gzipped (Beam's readers usually decompress .gz already)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            yield 0, None, f"not a readable gzip file: {e}"
            return
    data = data.removeprefix(codecs.BOM_UTF8)
    if _is_json_document(path):
        yield from _json_document_rows(data)
        return
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        text, problem = _utf8(line)
        yield number, *(_json_row(text) if problem is None else (None, problem))


def _utf8(data: bytes) -> tuple[str, str | None]:
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as e:
        return "", f"not UTF-8 text (byte {e.start + 1}: {data[e.start:e.start + 4]!r})"


def _json_row(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the row, None) of one JSON object's text, or (None, why it is not one)."""
    try:
        row = json.loads(text)
    except RecursionError:
        return None, f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
    except ValueError as e:  # JSONDecodeError, and an integer of more than 4300 digits
        return None, f"invalid JSON: {e}"
    return _checked_row(row)


def _checked_row(row: Any) -> tuple[dict[str, Any] | None, str | None]:
    if not isinstance(row, dict):
        return None, f"expected a JSON object, got {type(row).__name__}"
    deep = _too_deep(row)
    if deep is not None:
        return None, f"field `{deep}`: nested deeper than {MAX_DEPTH} levels"
    return row, None


def _too_deep(row: dict) -> str | None:
    """The top-level field whose value nests deeper than MAX_DEPTH, or None (without recursion)."""
    for name, value in row.items():
        stack = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, (dict, list)):
                if depth > MAX_DEPTH:
                    return str(name)
                stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return None


def _json_document_rows(data: bytes) -> Iterator[Row]:
    text, problem = _utf8(data)
    if problem is not None:
        yield 0, None, problem
        return
    try:
        document = json.loads(text)
    except RecursionError:
        yield 0, None, f"invalid JSON: nested deeper than {MAX_DEPTH} levels"
        return
    except ValueError as e:
        yield 0, None, f"invalid JSON: {e}"
        return
    items = document if isinstance(document, list) else [document]
    for number, row in enumerate(items, start=1):
        yield number, *_checked_row(row)


def _parquet_rows(data: bytes) -> Iterator[Row]:
    import pyarrow.parquet as pq
    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as e:  # ArrowException, OSError, and a malformed footer's own ValueErrors
        yield 0, None, f"not a readable Parquet file: {e}"
        return
    try:
        every = table.to_pylist()
    except Exception:  # a cell Python cannot hold (a date out of range): told row by row below
        every = None
    for number in range(1, table.num_rows + 1):
        try:
            # Tasks are JSON data wherever they come from: a timestamp, decimal or bytes cell
            # becomes its text, as it would be written in a JSONL task file.
            cells = every[number - 1] if every is not None else table.slice(number - 1, 1).to_pylist()[0]
            row = json.loads(json.dumps({k: v for k, v in cells.items() if v is not None}, default=str))
        except (RecursionError, ValueError, OverflowError, TypeError) as e:  # e.g. a date out of range
            yield number, None, f"cannot read the row: {type(e).__name__}: {e}"
            continue
        yield number, *_checked_row(row)
