"""The run layout (DESIGN.md): where every table, checkpoint and commit marker of a run lives.

Files go through schemas/storage.py (pyarrow's filesystems), so a local folder and
gs://bucket/prefix both work, and reading a run needs no Beam: `flywheel sql` starts without it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from flywheel.schemas import TABLES, read_table, storage, table_dataset
from flywheel.schemas.tables import KEPT_TABLES, PARTITION_COLUMNS


@dataclass(frozen=True)
class RunLayout:
    root: str

    def __post_init__(self):
        if self.root.startswith("gs://"):
            from flywheel.transforms.gcs_credentials import anonymous_for_emulator
            anonymous_for_emulator()

    def join(self, *parts: str) -> str:
        """`parts` below the run's root. A part that is itself a path (absolute, or a URI) is
        refused: os.path.join would silently drop the root, storage.join would nest it twice."""
        for part in parts:
            if part.startswith("/") or "://" in part:
                raise ValueError(f"RunLayout.join takes names below the run's root, not a path: "
                                 f"{part!r} (use storage.join for a path)")
        return storage.join(self.root, *parts)

    @property
    def run_json(self) -> str:
        return self.join("run.json")

    def table_dir(self, table: str, iteration: int | None = None) -> str:
        base = self.join("tables", table)
        return base if iteration is None else storage.join(base, f"iteration={iteration}")

    def table_dataset(self, table: str):
        """The whole `table` of the run as one pyarrow dataset (empty if none yet)."""
        return table_dataset(self.table_dir(table), table)

    def read_table(self, table: str, **kwargs):
        """The whole `table` of the run (`columns=`, `filter=` as for schemas.read_table)."""
        return read_table(self.table_dir(table), table, **kwargs)

    def checkpoint(self, iteration: int | None) -> str:
        """checkpoints/iteration=K, or checkpoints/initial (the warm-started policy) for None."""
        return self.join("checkpoints", "initial" if iteration is None else f"iteration={iteration}")

    def commit_marker(self, iteration: int) -> str:
        return self.join("iterations", str(iteration), "_COMMITTED")

    def rollout_marker(self, iteration: int) -> str:
        """iterations/K/_ROLLED_OUT: iteration K's rollout tables are complete (an overlapped
        run's experience buffer: its update may not have run yet)."""
        return self.join("iterations", str(iteration), "_ROLLED_OUT")

    def initial_marker(self) -> str:
        return self.join("checkpoints", "initial", "_COMMITTED")

    # -- reading and writing small files -------------------------------------------------------
    def exists(self, path: str) -> bool:
        return storage.exists(path)

    def write_json(self, path: str, value) -> None:
        """Write atomically: a marker cut short by a kill must not look complete."""
        data = json.dumps(value, indent=2, sort_keys=True, default=str).encode()
        storage.write_whole(path, data, durable=True)

    def read_json(self, path: str):
        return json.loads(storage.read_file(path).decode())

    def committed_iterations(self) -> list[int]:
        found = []
        for path in storage.list_files(self.join("iterations"), recursive=True):
            *_, name, marker = path.split("/")
            if marker == "_COMMITTED" and name.isdigit():
                found.append(int(name))
        return sorted(found)

    def delete_iteration(self, iteration: int, keep: tuple[str, ...] = ()) -> None:
        """Remove everything an incomplete iteration may have written, so a rerun duplicates
        nothing; the tables named in `keep` stay (an overlapped run's evaluations)."""
        paths = [self.table_dir(t, iteration) for t in TABLES
                 if t not in keep and t not in KEPT_TABLES and "iteration" in PARTITION_COLUMNS[t]]
        paths += [self.checkpoint(iteration), self.join("iterations", str(iteration))]
        self.delete_paths(paths)

    def delete_update(self, iteration: int) -> None:
        """Remove what an interrupted update of iteration K wrote (its checkpoint and trainer
        metrics), keeping its rollout: it is trained again from the same rows."""
        self.delete_paths([self.checkpoint(iteration),
                           storage.join(self.table_dir("metrics", iteration), "trainer.parquet")])

    def delete_paths(self, paths: list[str]) -> None:
        """Remove each of `paths` (a file, or a folder with everything below it; local or on an
        object store) that exists."""
        for path in paths:
            storage.delete(path)

