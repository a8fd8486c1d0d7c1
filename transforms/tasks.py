"""ReadTasks: tasks from the built-in domain generators or from users' JSONL files.

Every task that cannot be used (unknown domain, missing field, prompt too long, a generator that
raised) becomes an `errors` row of kind `input`, naming the file and line where there is one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.io import fileio

from flywheel.domains.registry import get_domain
from flywheel.transforms.errors import ERRORS_TAG, count, error_row, errors_output

REQUIRED_FIELDS = ("task_id", "domain", "prompt", "answer")


def check_task(task: dict, max_prompt_bytes: int) -> str | None:
    """The first problem with a task dict, or None when it is usable."""
    for name in REQUIRED_FIELDS:
        if name not in task:
            return f"field `{name}` missing"
        if not isinstance(task[name], str) or (name != "answer" and not task[name]):
            return f"field `{name}` must be a non-empty string, got {type(task[name]).__name__}"
    try:
        get_domain(task["domain"])
    except KeyError as e:
        return f"field `domain`: {e.args[0]}"
    if len(task["prompt"].encode()) > max_prompt_bytes:
        return f"field `prompt` is {len(task['prompt'].encode())} bytes; the policy takes at most {max_prompt_bytes}"
    if task.get("split", "train") not in ("train", "heldout"):
        return f"field `split` must be train or heldout, got {task['split']!r}"
    return None


class _GenerateTask(beam.DoFn):
    def __init__(self, seed: int, max_prompt_bytes: int):
        self.seed, self.max_prompt_bytes = seed, max_prompt_bytes

    def process(self, spec):
        domain, split, index = spec
        element = {"domain": domain, "task_id": f"{domain}-{split}-{index:06d}"}
        try:
            task = get_domain(domain).make_task(split, index, self.seed)
            problem = check_task(task, self.max_prompt_bytes)
        except Exception as e:  # a broken generator is an input problem of that domain only
            yield errors_output(error_row("read_tasks", "input", e, element))
            return
        if problem:
            yield errors_output(error_row("read_tasks", "input", f"{task['task_id']}: {problem}", task))
            return
        count("tasks")
        yield task


class _ParseJsonl(beam.DoFn):
    def __init__(self, max_prompt_bytes: int):
        self.max_prompt_bytes = max_prompt_bytes

    def process(self, readable):
        path = readable.metadata.path
        for number, line in enumerate(readable.read_utf8().splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                task = json.loads(line)
                if not isinstance(task, dict):
                    raise ValueError(f"expected a JSON object, got {type(task).__name__}")
            except ValueError as e:
                yield errors_output(error_row("read_tasks", "input", f"{where}: invalid JSON: {e}",
                                              payload=line[:2000]))
                continue
            problem = check_task(task, self.max_prompt_bytes)
            if problem:
                yield errors_output(error_row("read_tasks", "input", f"{where}: {problem}",
                                              {k: v for k, v in task.items() if isinstance(v, str)},
                                              payload=line[:2000]))
                continue
            count("tasks")
            yield {**task, "split": task.get("split", "train"), "source": where}


class ReadTasks(beam.PTransform):
    """Tasks as dicts (task_id, domain, prompt, answer, split), plus an `errors` output.

    `specs` are (domain, split, index) triples drawn from the built-in generators; `patterns`
    are file patterns of JSONL task files (any Beam filesystem).
    """

    def __init__(self, specs: Sequence[tuple[str, str, int]] = (), patterns: Sequence[str] = (),
                 seed: int = 0, max_prompt_bytes: int = 1 << 20):
        super().__init__()
        self.specs, self.patterns = list(specs), list(patterns)
        self.seed, self.max_prompt_bytes = seed, max_prompt_bytes

    def expand(self, pbegin):
        outputs = []
        if self.specs:
            outputs.append(
                pbegin
                | "TaskSpecs" >> beam.Create(self.specs, reshuffle=False)
                | "Generate" >> beam.ParDo(_GenerateTask(self.seed, self.max_prompt_bytes))
                .with_outputs(ERRORS_TAG, main="tasks"))
        for i, pattern in enumerate(self.patterns):
            outputs.append(
                pbegin
                | f"Match{i}" >> fileio.MatchFiles(pattern)
                | f"Open{i}" >> fileio.ReadMatches()
                | f"Parse{i}" >> beam.ParDo(_ParseJsonl(self.max_prompt_bytes))
                .with_outputs(ERRORS_TAG, main="tasks"))
        if not outputs:
            raise ValueError("ReadTasks needs task specs or task file patterns")
        tasks = [o.tasks for o in outputs] | "AllTasks" >> beam.Flatten()
        errors = [o[ERRORS_TAG] for o in outputs] | "AllErrors" >> beam.Flatten()
        return {"tasks": tasks, ERRORS_TAG: errors}
