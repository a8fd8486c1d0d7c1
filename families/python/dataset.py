"""DatasetDomain: a domain whose tasks are the rows of a shipped file instead of a generator.

The file is JSONL (optionally gzipped) under families/python/data/ or an absolute path; it is read once,
on first use, so listing domains stays cheap. A row's `split` decides its split; rows without one
are split by content hash, like generated tasks.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from pathlib import Path
from typing import Any

from flywheel.domains.domain import SPLITS, Domain

DATA_DIR = Path(__file__).resolve().parent / "data"


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class DatasetDomain(Domain):
    """Tasks from `task_file`; `normalize_task(row)` turns a row into a task dict."""

    task_file: str = ""

    def rows(self) -> list[dict[str, Any]]:
        if "_rows" not in self.__dict__:
            path = Path(self.task_file)
            self._rows = read_jsonl(path if path.is_absolute() else DATA_DIR / path)
        return self._rows

    def task_count(self) -> int | None:
        return len(self.rows())

    def tasks(self, split: str) -> list[dict[str, Any]]:
        if "_tasks" not in self.__dict__:
            self._tasks = {s: [] for s in SPLITS}
            for number, row in enumerate(self.rows()):
                task = self.normalize_task(row)
                task.setdefault("task_id", f"{self.name}-{number:06d}")
                task["split"] = row.get("split") or self.split_of(task["prompt"])
                task["domain"] = self.name
                self._tasks[task["split"]].append(task)
        return self._tasks[split]

    def make_task(self, split: str, index: int, seed: int) -> dict[str, Any]:
        """Task `index` of a seeded order of the split's rows (cycling when index exceeds it)."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
        tasks = self.tasks(split)
        if not tasks:
            raise RuntimeError(f"domain {self.name}: no {split} tasks in {self.task_file}")
        order = sorted(tasks, key=lambda t: hashlib.sha256(f"{seed}:{t['task_id']}".encode()).digest())
        return dict(order[index % len(order)])

    def sample_task(self, rng: random.Random) -> dict[str, Any]:
        return dict(rng.choice(self.tasks(rng.choice(SPLITS)) or self.tasks("train")))
