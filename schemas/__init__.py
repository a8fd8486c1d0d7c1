"""Schemas of every Flywheel table, their version, and validation helpers (pyarrow only)."""

from flywheel.schemas.tables import (ERRORS, METRICS, PARTITION_COLUMNS, SCHEMA_VERSION, TABLES,
                                     TRAJECTORIES, file_schema)
from flywheel.schemas.validation import (SchemaVersionError, check_file_metadata, check_version,
                                         rows_to_file_table, validate_table)

__all__ = ["ERRORS", "METRICS", "PARTITION_COLUMNS", "SCHEMA_VERSION", "TABLES", "TRAJECTORIES",
           "SchemaVersionError", "check_file_metadata", "check_version", "file_schema",
           "rows_to_file_table", "validate_table"]
