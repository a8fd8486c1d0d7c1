"""Turning rows into validated Arrow tables, and checking the version of what a reader finds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pyarrow as pa

from flywheel.schemas.tables import SCHEMA_VERSION, TABLES, file_schema


class SchemaVersionError(ValueError):
    """A table was written with a schema major version this code does not know."""


def check_version(version: str | bytes | None, where: str) -> None:
    """Reject a missing or unknown major version, naming the file and both versions."""
    if isinstance(version, bytes):
        version = version.decode()
    if not version:
        raise SchemaVersionError(f"{where}: no Flywheel schema version recorded "
                                 f"(expected major {SCHEMA_VERSION.split('.')[0]})")
    major = version.split(".")[0]
    if major != SCHEMA_VERSION.split(".")[0]:
        raise SchemaVersionError(
            f"{where}: schema version {version} is not readable by this Flywheel, which reads "
            f"major version {SCHEMA_VERSION.split('.')[0]} (schema {SCHEMA_VERSION}); "
            "use a Flywheel release that matches the run, or migrate the table")


def check_file_metadata(schema: pa.Schema, where: str) -> None:
    """Check the version stored in a Parquet file's schema metadata."""
    meta = schema.metadata or {}
    check_version(meta.get(b"flywheel.schema_version"), where)


def check_table_versions(table: pa.Table, where: str) -> None:
    """Check the `schema_version` column of every row (a table may mix files)."""
    if "schema_version" not in table.column_names:
        raise SchemaVersionError(f"{where}: no schema_version column")
    for version in set(table.column("schema_version").to_pylist()):
        check_version(version, where)


def rows_to_file_table(table: str, rows: Iterable[Mapping]) -> pa.Table:
    """Build the Arrow table of one Parquet file from row dicts, validating every value's type.

    Partition columns are dropped (they belong to the path); `schema_version` is filled in.
    """
    schema = file_schema(table)
    columns: dict[str, list] = {name: [] for name in schema.names}
    for row in rows:
        for name in schema.names:
            value = row.get(name)
            if name == "schema_version" and value is None:
                value = SCHEMA_VERSION
            columns[name].append(value)
    return pa.Table.from_pydict(columns, schema=schema)


def validate_table(table_name: str, table: pa.Table, where: str = "") -> None:
    """Check a read-back table against the logical schema: every column present with its type."""
    expected = TABLES[table_name]
    where = where or table_name
    check_table_versions(table, where)
    for field in expected:
        if field.name not in table.column_names:
            raise ValueError(f"{where}: column {field.name!r} missing")
        actual = table.schema.field(field.name).type
        if not actual.equals(field.type) and not _compatible(actual, field.type):
            raise ValueError(f"{where}: column {field.name!r} has type {actual}, expected {field.type}")


def _compatible(actual: pa.DataType, expected: pa.DataType) -> bool:
    # Hive partition values come back as dictionary or wider integer types.
    if pa.types.is_dictionary(actual):
        actual = actual.value_type
    if pa.types.is_integer(expected) and pa.types.is_integer(actual):
        return True
    if pa.types.is_string(expected) and (pa.types.is_string(actual) or pa.types.is_large_string(actual)):
        return True
    return actual.equals(expected)
