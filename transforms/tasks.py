"""ReadTasks: tasks from the built-in domain generators or from users' JSONL / Parquet files.

Every task that cannot be used (unknown domain, missing field, prompt too long, a generator that
raised) becomes an `errors` row of kind `input`, naming the file and line where there is one.

Generated tasks are described by `TaskRange`s, one per (domain, split): the pipeline graph and the
driver hold a few ranges whatever the number of tasks, and the workers cut them into chunks and
expand the indices, so 100k tasks cost the driver what 100 do.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io import fileio

from flywheel.domains.environments import with_environment
from flywheel.domains.registry import get_domain, prepare_task
from flywheel.domains.task_files import expand_pattern, rows_of_file, where
from flywheel.transforms.errors import ERRORS_TAG, count, error_row, errors_output

CHUNK_TASKS = 1000  # indices per chunk: the unit of parallelism between workers


class TaskRange(NamedTuple):
    """Tasks `start`..`stop - 1` of one domain's split, as its generator numbers them."""
    domain: str
    split: str
    start: int
    stop: int


def chunks(task_range: TaskRange, size: int = CHUNK_TASKS) -> Iterator[TaskRange]:
    """`task_range` cut into consecutive ranges of at most `size` tasks."""
    for start in range(task_range.start, task_range.stop, size):
        yield task_range._replace(start=start, stop=min(start + size, task_range.stop))


def task_indices(task_range: TaskRange) -> Iterator[tuple[str, str, int]]:
    """The (domain, split, index) of every task in `task_range`, in order."""
    for index in range(task_range.start, task_range.stop):
        yield task_range.domain, task_range.split, index


def prompt_problem(task: dict, max_prompt_bytes: int) -> str | None:
    size = len(task["prompt"].encode())
    if size > max_prompt_bytes:
        return f"field `prompt` is {size} bytes; at most {max_prompt_bytes} are read"
    return None


class _GenerateTask(beam.DoFn):
    def __init__(self, seed: int, max_prompt_bytes: int):
        self.seed, self.max_prompt_bytes = seed, max_prompt_bytes

    def process(self, spec):
        domain, split, index = spec
        element = {"domain": domain, "task_id": f"{domain}-{split}-{index:06d}"}
        try:
            task = get_domain(domain).make_task(split, index, self.seed)
            problems = get_domain(domain).validate_task(task) or [prompt_problem(task, self.max_prompt_bytes)]
        except Exception as e:  # a broken generator is an input problem of that domain only
            yield errors_output(error_row("read_tasks", "input", e, element))
            return
        if any(problems):
            message = f"{task['task_id']}: {'; '.join(p for p in problems if p)}"
            yield errors_output(error_row("read_tasks", "input", message, task))
            return
        count("tasks")
        yield task


class _ParseTaskFile(beam.DoFn):
    """Rows of one JSONL/Parquet task file -> tasks, or `input` errors naming file, line, field."""

    def __init__(self, max_prompt_bytes: int, environment: str = ""):
        self.max_prompt_bytes, self.environment = max_prompt_bytes, environment

    def process(self, readable):
        path = readable.metadata.path
        for number, row, problem in rows_of_file(path, readable.read()):
            at = where(path, number)
            task, problems = (None, [problem]) if problem else prepare_task(with_environment(row, self.environment))
            if task is not None:
                problems = [p for p in [prompt_problem(task, self.max_prompt_bytes)] if p]
            if problems:
                strings = {k: v for k, v in (row or {}).items() if isinstance(v, str)}
                payload = json.dumps(row, default=str)[:2000] if row is not None else None
                yield errors_output(error_row("read_tasks", "input", f"{at}: {'; '.join(problems)}",
                                              strings, payload=payload))
                continue
            count("tasks")
            yield {**task, "source": at}


class ReadTasks(beam.PTransform):
    """Tasks as dicts (task_id, domain, prompt, answer, split), plus an `errors` output.

    `ranges` are `TaskRange`s of the built-in generators; `patterns` are file patterns of JSONL
    (.jsonl, .jsonl.gz) or Parquet task files (any Beam filesystem). Ranges are cut into chunks
    of `chunk_tasks` and the chunks reshuffled (a few hundred small elements), so that on a
    distributed runner each worker generates, samples and executes its own chunks; the indices
    themselves only ever exist on the workers.
    """

    def __init__(self, ranges: Sequence[TaskRange] = (), patterns: Sequence[str] = (),
                 seed: int = 0, max_prompt_bytes: int = 1 << 20, chunk_tasks: int = CHUNK_TASKS,
                 environment: str = ""):
        super().__init__()
        self.ranges, self.patterns = [TaskRange(*r) for r in ranges], list(patterns)
        self.seed, self.max_prompt_bytes, self.chunk_tasks = seed, max_prompt_bytes, chunk_tasks
        self.environment = environment  # of file rows that name none (--environment)

    def expand(self, pbegin):
        outputs = []
        if self.ranges:
            outputs.append(
                pbegin
                | "TaskRanges" >> beam.Create(self.ranges, reshuffle=False)
                | "Chunks" >> beam.FlatMap(chunks, self.chunk_tasks)
                | "SpreadChunks" >> beam.Reshuffle()
                | "TaskIndices" >> beam.FlatMap(task_indices)
                | "Generate" >> beam.ParDo(_GenerateTask(self.seed, self.max_prompt_bytes))
                .with_outputs(ERRORS_TAG, main="tasks"))
        for i, pattern in enumerate(p for given in self.patterns for p in expand_pattern(given)):
            outputs.append(
                pbegin
                | f"Match{i}" >> fileio.MatchFiles(pattern)
                | f"Open{i}" >> fileio.ReadMatches()
                | f"Parse{i}" >> beam.ParDo(_ParseTaskFile(self.max_prompt_bytes, self.environment))
                .with_outputs(ERRORS_TAG, main="tasks"))
        if not outputs:
            raise ValueError("ReadTasks needs task ranges or task file patterns")
        tasks = [o.tasks for o in outputs] | "AllTasks" >> beam.Flatten()
        errors = [o[ERRORS_TAG] for o in outputs] | "AllErrors" >> beam.Flatten()
        return {"tasks": tasks, ERRORS_TAG: errors}
