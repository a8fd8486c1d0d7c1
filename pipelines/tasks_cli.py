"""`flywheel tasks validate FILE...`: every problem of a task file, with file, line and field.

    flywheel tasks validate my_tasks.jsonl gs://bucket/more/*.parquet --domain python_tests

Files are JSONL (optionally .gz) or Parquet, on any Beam filesystem; a pattern matches many.
Rows are checked the way the pipeline reads them (`prepare_task`), plus duplicate task ids.
Exit status 1 when anything is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from flywheel.domains.registry import prepare_task
from flywheel.domains.task_files import rows_of_file, where


def read_rows(pattern: str) -> Iterator[tuple[str, int, dict[str, Any] | None, str | None]]:
    """(path, line or row number, row or None, problem or None) for every row of the matching files."""
    from apache_beam.io.filesystems import FileSystems
    matched = FileSystems.match([pattern])[0].metadata_list
    if not matched:
        yield pattern, 0, None, "no file matches"
    for meta in sorted(matched, key=lambda m: m.path):
        with FileSystems.open(meta.path) as f:
            data = f.read()
        for number, row, problem in rows_of_file(meta.path, data):
            yield meta.path, number, row, problem


def load_tasks(patterns: list[str], default_domain: str | None = None):
    """(tasks, problems): the usable tasks of the files, and "path: line N: problem" strings."""
    tasks, problems, seen = [], [], {}
    for pattern in patterns:
        for path, number, row, problem in read_rows(pattern):
            at = where(path, number)
            if problem:
                problems.append(f"{at}: {problem}")
                continue
            task, found = prepare_task(row, default_domain)
            key = row.get("task_id")
            if isinstance(key, str) and key in seen:
                found.append(f"field `task_id`: {key!r} repeats {seen[key]}")
            elif isinstance(key, str):
                seen[key] = at
            problems += [f"{at}: {p}" for p in found]
            if task is not None and not found:
                tasks.append({**task, "source": at})
    return tasks, problems


def add_parser(sub) -> None:
    tasks = sub.add_parser("tasks", help="work with task files (JSONL or Parquet, any filesystem)")
    actions = tasks.add_subparsers(dest="tasks_command", required=True)
    validate = actions.add_parser("validate", help="report every problem, with file, line and field")
    validate.add_argument("files", nargs="+", help="paths or patterns (local, gs://, ...)")
    validate.add_argument("--domain", help="domain of rows that have no `domain` field")
    validate.add_argument("--format", choices=("text", "json"), default="text")


def run(args, console) -> int:
    tasks, problems = load_tasks(args.files, args.domain)
    if args.format == "json":
        print(json.dumps({"tasks": len(tasks), "problems": problems}))
    else:
        for problem in problems:
            console.print(problem, markup=False, highlight=False)
        style = "red" if problems else "green"
        console.print(f"[{style}]{len(tasks)} valid tasks, {len(problems)} problems[/]")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from rich.console import Console
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv), Console())
