"""Are two runs' tables the same, wall-clock aside? The check behind a restructuring that must not
change behaviour: run the same command and seed on the code before and after, then

    python bench/same_tables.py RUN_DIR_BEFORE RUN_DIR_AFTER

Every table (trajectories, errors, metrics) is read whole from both run directories; columns that
hold wall-clock time or the run's name (schemas/compare.py's VOLATILE, at any depth) are left
out, rows are compared as sorted multisets, and the first differences are printed. Exit 0 when all
are identical. The checkpoint digests in `trajectories` make the trainer's weights part of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.dataset as ds

from flywheel.schemas.compare import comparable_rows

TABLES = ("trajectories", "errors", "metrics")

def rows(run_dir: Path, table: str) -> list[str]:
    """The table's rows, volatile columns out, as sorted canonical JSON (iteration and domain, the
    partition keys, included)."""
    folder = run_dir / "tables" / table
    if not folder.exists():
        return []
    data = ds.dataset(folder, format="parquet", partitioning="hive").to_table().to_pylist()
    return comparable_rows(data)


def compare(before: Path, after: Path) -> bool:
    same = True
    for table in TABLES:
        a, b = rows(before, table), rows(after, table)
        if a == b:
            print(f"{table}: identical ({len(a)} rows)")
            continue
        same = False
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        print(f"{table}: DIFFERENT ({len(a)} vs {len(b)} rows; {len(only_a)} only before, "
              f"{len(only_b)} only after)")
        for ra, rb in list(zip(only_a, only_b))[:3]:
            da, db = json.loads(ra), json.loads(rb)
            keys = [k for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)]
            print("  differs in:", ", ".join(keys)[:300])
    return same


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    args = p.parse_args()
    return 0 if compare(args.before, args.after) else 1


if __name__ == "__main__":
    sys.exit(main())
