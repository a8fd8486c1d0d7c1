"""Schemas of every Flywheel table, their version, validation, and the one table reader (pyarrow only)."""

from flywheel.schemas.read import check_file_version, read_table, table_dataset
from flywheel.schemas.tables import (ERRORS, METRICS, PARTITION_COLUMNS, SCHEMA_VERSION, TABLES,
                                     TRAJECTORIES, file_schema)
from flywheel.schemas.storage import resolve_uri
from flywheel.schemas.validation import (SchemaVersionError, check_file_metadata, check_version,
                                         rows_to_file_table, validate_table)

__all__ = ["ERRORS", "METRICS", "PARTITION_COLUMNS", "SCHEMA_VERSION", "TABLES", "TRAJECTORIES",
           "SchemaVersionError", "check_file_metadata", "check_file_version", "check_version",
           "file_schema", "read_table", "resolve_uri", "rows_to_file_table", "table_dataset",
           "validate_table"]
