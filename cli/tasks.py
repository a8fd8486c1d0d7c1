"""`flywheel tasks validate FILE...`: every problem of a task file, with file, line and field.

    flywheel tasks validate my_tasks.jsonl gs://bucket/more/*.parquet --domain python_tests

Files are JSONL (optionally .gz) or Parquet, on any Beam filesystem; a pattern matches many.
Rows are checked the way the pipeline reads them (`prepare_task`), plus duplicate task ids.
Rows without a `domain` are read in the published format their fields show (HumanEval, MBPP,
GSM8K, MATH, Spider-like SQL; domains/task_formats.py), and the report says which format each
file was read in (each line's, for a file that mixes them); `--domain` overrides the format's
domain. Repository tasks are also run in the sandbox (`--sandbox`: local, or docker for tasks that
name their image; `--no-run` skips it): the snapshot as it is must fail every hidden check and
pass every regression check, and the `reference_patch`, when given, must pass them all; each
check that does not is a problem. Exit status 1 when anything is wrong.

A task file is untrusted: validating one writes only to your snapshot store
($FLYWHEEL_SNAPSHOT_STORE, the snapshots its rows name, read by families/repository/repo_snapshot.py's rules)
and, for the sandbox runs, the snapshot base cache ($FLYWHEEL_SNAPSHOT_CACHE); a row cannot name
another store, a file outside its task file's folder, or a name that leaves the snapshot's root.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from flywheel.domains.environments import with_environment
from flywheel.domains.registry import prepare_task
from flywheel.domains.task_files import expand_pattern, raw_rows, task_rows, where
from flywheel.domains.task_formats import TASK_FORMATS
from flywheel.cli.arg_types import positive_int


def _files(pattern: str) -> Iterator[tuple[str, bytes | None]]:
    """(path, bytes) of every file matching `pattern`; (pattern, None) when none does."""
    from apache_beam.io.filesystems import FileSystems
    matched = FileSystems.match([pattern])[0].metadata_list
    if not matched:
        yield pattern, None
    for meta in sorted(matched, key=lambda m: m.path):
        with FileSystems.open(meta.path) as f:
            yield meta.path, f.read()


def read_rows(pattern: str) -> Iterator[tuple[str, int, dict[str, Any] | None, str | None]]:
    """(path, line or row number, row or None, problem or None) for every row of the matching
    files, as stored (responses files, say)."""
    for path, data in _files(pattern):
        if data is None:
            yield path, 0, None, "no file matches"
            continue
        for number, row, problem in raw_rows(path, data):
            yield path, number, row, problem


def read_task_rows(pattern: str, default_domain: str | None = None
                   ) -> Iterator[tuple[str, int, dict[str, Any] | None, str | None, str | None]]:
    """As read_rows, plus each row's task format (None: the row names its domain); rows without
    `domain` are read as their format's tasks (task_files.task_rows)."""
    for path, data in (f for each in expand_pattern(pattern) for f in _files(each)):
        if data is None:
            yield path, 0, None, "no file matches", None
            continue
        for number, row, problem, fmt in task_rows(path, data, default_domain):
            yield path, number, row, problem, fmt


def load_tasks(patterns: list[str], default_domain: str | None = None, formats: dict | None = None,
               environment: str | None = None):
    """(tasks, problems): the usable tasks of the files, and "path: line N: problem" strings.
    `formats`, when given, receives {path: {line: task format name or None}}; `environment`
    is given to every row that names none and runs in one (domains/environments.py)."""
    tasks, problems, seen = [], [], {}
    for pattern in patterns:
        for path, number, row, problem, fmt in read_task_rows(pattern, default_domain):
            if formats is not None and number and (row is not None or fmt):  # rows read at all
                formats.setdefault(path, {})[number] = fmt
            at = where(path, number)
            if problem:
                problems.append(f"{at}: {problem}")
                continue
            task, found = prepare_task(with_environment(row, environment, default_domain), default_domain)
            key = task["task_id"] if task else row.get("task_id")
            if isinstance(key, str) and key in seen:
                found.append(f"field `task_id`: {key!r} repeats {seen[key]}")
            elif isinstance(key, str):
                seen[key] = at
            problems += [f"{at}: {p}" for p in found]
            if task is not None and not found:
                tasks.append({**task, "source": at})
    return tasks, problems


def format_report(formats: dict[str, dict[int, str | None]]) -> list[str]:
    """Which task format each file was read in: one line per file, or per line for a file
    whose rows mix formats."""
    lines = []
    for path, by_line in formats.items():
        names = Counter(by_line.values())
        if len(names) == 1:
            (name, count), = names.items()
            lines.append(f"{where(path, 0)}: {_format_title(name)}, {count} rows")
            continue
        mix = ", ".join(f"{_format_title(n)} {c}" for n, c in names.most_common())
        lines.append(f"{where(path, 0)}: mixes task formats ({mix}); by line:")
        lines += [f"{where(path, number)}: {_format_title(name)}" for number, name in by_line.items()]
    return lines


def _format_title(name: str | None) -> str:
    if name is None:
        return "rows name their own `domain`"
    fmt = TASK_FORMATS.get(name)
    return f"{fmt.title} format (domain {fmt.domain})"


def add_parser(sub) -> None:
    tasks = sub.add_parser("tasks", help="work with task files (JSONL or Parquet, any filesystem)")
    actions = tasks.add_subparsers(dest="tasks_command", required=True)
    validate = actions.add_parser("validate", help="report every problem, with file, line and field")
    validate.add_argument("files", nargs="+", help="paths or patterns (local, gs://, ...)")
    validate.add_argument("--domain", help="domain of rows that have no `domain` field")
    validate.add_argument("--format", choices=("text", "json"), default="text")
    validate.add_argument("--environment", metavar="NAME",
                          help="the environment (`flywheel env build NAME`) of every row that names none")
    validate.add_argument("--no-run", action="store_true",
                          help="check the fields only: do not run repository tasks in the sandbox")
    validate.add_argument("--sandbox", choices=("local", "docker"), default="local",
                          help="where repository tasks run (docker: in the image a task names; "
                               "DOCKER_HOST says which daemon)")
    validate.add_argument("--workers", type=positive_int, default=4, metavar="N",
                          help="repository tasks run in the sandbox N at a time (default: %(default)s)")


def run(args, console) -> int:
    formats: dict = {}
    tasks, problems = load_tasks(args.files, args.domain, formats, args.environment)
    if not args.no_run:
        from flywheel.families.repository.task_checks import check_repo_tasks  # the sandbox, on demand
        quiet = args.format == "json"
        problems += check_repo_tasks(tasks, lambda line: quiet or console.print(
            line, markup=False, highlight=False), args.sandbox, args.workers)
        from flywheel.families.harbor.task_checks import check_harbor_tasks  # solution 1, nothing 0
        problems += check_harbor_tasks(tasks, lambda line: quiet or console.print(
            line, markup=False, highlight=False), args.sandbox)
    if args.format == "json":
        print(json.dumps({"tasks": len(tasks), "problems": problems,
                          "formats": {path: {str(n): f for n, f in lines.items()}
                                      for path, lines in formats.items()}}))
    else:
        for line in format_report(formats):
            console.print(line, markup=False, highlight=False)
        for problem in problems:
            console.print(problem, markup=False, highlight=False)
        style = "red" if problems else "green"
        console.print(f"[{style}]{len(tasks)} valid tasks, {len(problems)} problems[/]")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from flywheel.cli.terminal import console_for
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv), console_for())
