"""`flywheel verify`: score responses to tasks exactly as the pipeline's Verify step does.

    flywheel verify --tasks humaneval.jsonl --responses answers.jsonl > scored.jsonl
    flywheel verify ... --sandbox bwrap --sandbox-options warm=false   # choose the sandbox path

Responses are JSONL rows `{"task_id", "response"}`. Each goes through the same functions as the
pipeline (execute_batch in the sandbox, verify_attempt, apply_filters) and comes out as one JSON
line: task_id, domain, reward, verdict, reward_components, exploit_suspected, filtered,
filter_reason, detail. A response to an unknown or invalid task is an `input_error` line.
Every verification is bounded as in the pipeline (flywheel.verifiers.bounded): past
`--verify-deadline` seconds or `--verify-memory-mb` the response scores 0 as a model failure.
"""

from __future__ import annotations

import json
from collections import Counter
from contextlib import nullcontext
from concurrent.futures import ThreadPoolExecutor

from rich.markup import escape

from flywheel.domains.task_files import where
from flywheel.cli.sandbox_flags import add_sandbox_flags, given_options
from flywheel.cli.tasks import load_tasks, read_rows
from flywheel.verifiers.bounded import BoundedVerifier, Bounds
from flywheel.cli.arg_types import positive_float, positive_int


def attempt_of(task: dict, response: str, index: int):
    """The attempt the pipeline would have made, with `response` as what was sampled."""
    from flywheel.transforms.expand import expand_task
    attempt, = expand_task(task, run_id="verify", iteration=0, policy_version=0, seed=0,
                           n_samples=1, temperature=0.0, mode="eval")
    return attempt.replace(sample_index=index, response=response)


def output_line(attempt) -> dict:
    return {"task_id": attempt.task_id, "domain": attempt.domain, "reward": attempt.reward_raw,
            "verdict": attempt.verdict, "reward_components": attempt.reward_components,
            "exploit_suspected": attempt.exploit_suspected, "filtered": attempt.filtered,
            "filter_reason": attempt.filter_reason, "detail": attempt.verdict_detail}


def verify_responses(tasks: list[dict], responses: list[dict], sandbox: str = "local",
                     workers: int = 2, batch_size: int = 64, sandbox_options: dict | None = None,
                     bounds: Bounds = Bounds(), bounded: BoundedVerifier | None = None):
    """Yield one output line per response, in order; verifications run in `bounded` (a worker of
    `bounds` opened for this call when None)."""
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.transforms.execute import execute_batch
    from flywheel.transforms.filters import apply_filters
    from flywheel.sandbox import get_backend
    from flywheel.transforms.verify import verify_attempt
    by_id = {t["task_id"]: t for t in tasks}
    with (get_backend(sandbox, **(sandbox_options or {})) as backend,
          nullcontext(bounded) if bounded else BoundedVerifier(bounds) as bounded,
          ThreadPoolExecutor(workers) as pool):
        for start in range(0, len(responses), batch_size):
            batch, lines = [], {}
            for i, row in enumerate(responses[start:start + batch_size], start=start):
                task = by_id.get(row.get("task_id"))
                if task is None or not isinstance(row.get("response"), str):
                    problem = "unknown task_id" if task is None else "field `response` missing"
                    lines[i] = {"task_id": row.get("task_id"), "domain": None, "reward": 0.0,
                                "verdict": "error", "reward_components": {},
                                "exploit_suspected": False, "filtered": True,
                                "filter_reason": "input_error", "detail": problem}
                else:
                    batch.append(attempt_of(task, row["response"], i))
            executed, _ = execute_batch(batch, ToolRunner(backend), pool)
            for attempt in executed:
                scored, _ = verify_attempt(attempt, bounded)
                lines[attempt.sample_index] = output_line(apply_filters(scored))
            yield from (lines[i] for i in sorted(lines))


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="score responses to tasks (same code path as the pipeline)")
    p.add_argument("--tasks", required=True, nargs="+", help="task files (JSONL/Parquet, any filesystem)")
    p.add_argument("--responses", required=True, help="JSONL of {task_id, response}")
    p.add_argument("--domain", help="domain of task rows that have no `domain` field")
    add_sandbox_flags(p)
    p.add_argument("--verify-deadline", type=positive_float, default=Bounds().deadline_s,
                   help="seconds one verification may take (default: %(default)s)")
    p.add_argument("--verify-memory-mb", type=positive_int, default=Bounds().memory_mb,
                   help="MiB one verification may add to its worker (default: %(default)s)")
    p.add_argument("--workers", type=positive_int, default=2, help="sandbox runs in parallel")


def sandbox_options(args) -> dict:
    """--sandbox-options as the backend's kwargs; ValueError for a malformed or unknown option."""
    from flywheel.sandbox import check_options
    options = given_options(args)
    check_options(args.sandbox, options)
    return options


def run(args, console) -> int:
    try:
        options = sandbox_options(args)
    except ValueError as e:
        console.print(f"[red]error: {escape(str(e))}[/]", highlight=False)
        return 2
    tasks, problems = load_tasks(args.tasks, args.domain)
    for problem in problems:
        console.print(f"[yellow]skipped task[/] {escape(problem)}", highlight=False)
    responses = []
    for path, number, row, problem in read_rows(args.responses):
        if problem:
            console.print(f"[red]{escape(where(path, number))}: {escape(problem)}[/]",
                          highlight=False)
            return 2
        responses.append(row)
    verdicts, total = Counter(), 0.0
    bounds = Bounds(deadline_s=args.verify_deadline, memory_mb=args.verify_memory_mb)
    for line in verify_responses(tasks, responses, args.sandbox, args.workers,
                                 sandbox_options=options, bounds=bounds):
        print(json.dumps(line), flush=True)
        verdicts[line["verdict"]] += 1
        total += line["reward"]
    mean = total / len(responses) if responses else 0.0
    console.print(f"{len(responses)} responses: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
                  + f"; mean reward {mean:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from rich.console import Console
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv), Console(stderr=True))
