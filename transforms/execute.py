"""Execute: run each attempt's answer in the sandbox, concurrently within a batch.

Every attempt is scored as a one-step episode (`Domain.answer_step`: its answer's program runs
once), through the one tool runner (domains/tool_runner.py), which retries a failure of the
sandbox itself (SandboxError) with backoff; if it persists the attempt keeps its row, marked as
an environment error, and an `errors` row says why. The code's own failures (non-zero exit,
timeout, memory) are results, not errors. `SandboxStage` takes this worker process's shared
sandbox backend (one warm pool per process: sandbox/shared_pool.py), the runner and a thread pool
in setup(), for Execute and the Turn stage alike.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import apache_beam as beam

from flywheel.domains.domain import Step
from flywheel.domains.registry import get_domain
from flywheel.domains.tool_runner import BACKOFF_S, RETRIES, ToolRunner, Unbuildable
from flywheel.transforms.errors import ERRORS_TAG, count, error_row, errors_output
from flywheel.sandbox import SandboxError, shared_pool, usage
from flywheel.sandbox.pool import CONCURRENCY
from flywheel.records.attempt import UNREADABLE, Attempt


def _run_one(attempt: Attempt, runner: ToolRunner) -> tuple[Step | None, dict | None, str | None]:
    """(step or None, error row or None, failure or None) for one attempt."""
    domain = get_domain(attempt.domain)
    try:
        return domain.answer_step(attempt.task, attempt.response, runner), None, None
    except Unbuildable as e:
        return (None, *_unbuildable(attempt, e))
    except SandboxError as e:
        return None, error_row("execute", "environment", e, attempt.context(),
                               retry_count=runner.retries), "environment"


def _unbuildable(attempt: Attempt, unbuildable: Unbuildable) -> tuple[dict, str]:
    """(errors row, failure) of a response that could not be made into a program (the runner's
    blame rule): the model's content broke it, a MODEL failure scored as a failed attempt
    (`unreadable`: verdict fail, reward 0); or the task cannot become a program: `input`."""
    problem = unbuildable.problem
    if unbuildable.blame != "model":
        return error_row("execute", "input", problem, attempt.context()), "input"
    count("responses_unreadable")
    error = error_row("execute", "model", f"the response cannot be made into a program: "
                      f"{type(problem).__name__}: {str(problem)[:300]}", attempt.context())
    error["error_type"] = UNREADABLE
    return error, UNREADABLE


def without_execution(attempt: Attempt) -> Attempt:
    """An attempt of a domain that executes nothing: one turn, no sandbox columns."""
    turn = {"action": attempt.response, "observation": None, "exit_code": None, "duration_ms": None}
    return attempt.replace(execution=None, turns=[turn], sandbox_backend=None,
                           sandbox_wall_ms=None, sandbox_cpu_ms=None)


def execute_batch(batch: list[Attempt], runner: ToolRunner,
                  pool) -> tuple[list[Attempt], list[dict]]:
    """Run the sandboxed attempts of `batch` concurrently on `pool`, through `runner`.

    Returns every attempt (with `execution`, `turns` and sandbox columns; `failure` set when it
    could not run) and the `errors` rows: `input` / `environment` when the attempt could not run,
    `model` when the model's code ran into a limit (timeout, cpu, memory, output, processes) or
    the response could not be made into a program (failure `unreadable`, scored 0 by Verify).
    """
    runnable = [a for a in batch if get_domain(a.domain).uses_sandbox]
    results = pool.map(lambda a: _run_one(a, runner), runnable)
    outcomes = dict(zip((id(a) for a in runnable), results))
    outputs, errors = [], []
    for attempt in batch:
        step, error, failure = outcomes.get(id(attempt), (None, None, None))
        execution = step.result if step is not None else None
        out = without_execution(attempt)
        if attempt.episode_end is not None:  # an episode keeps its turns; this run only scores it
            out = out.replace(turns=attempt.turns)
        if execution is not None and execution.kill_reason and execution.kill_reason != "signal":
            # The model's code hit a limit: still a scored (failed) attempt, and a `model` error
            # row so "which tasks make the policy write infinite loops?" is one query away.
            error = error_row("execute", "model", f"killed: {execution.kill_reason} limit "
                              f"(exit {execution.exit_code}, {execution.wall_ms:.0f} ms)",
                              attempt.context())
            error["error_type"] = execution.kill_reason
        if execution is not None:
            count("executions")
            turns = out.turns
            if attempt.episode_end is None:
                turns = [{**out.turns[0], "exit_code": execution.exit_code,
                          "observation": step.observation,
                          "duration_ms": execution.wall_ms}]
            out = out.replace(execution=execution, turns=turns, sandbox_backend=execution.backend,
                              sandbox_wall_ms=execution.wall_ms, sandbox_cpu_ms=execution.cpu_ms)
        if failure is not None:
            out = out.replace(failure=failure)
        if error is not None:
            errors.append(error)
        outputs.append(out)
    return outputs, errors


class SandboxStage(beam.DoFn):
    """A DoFn that runs actions in the sandbox: this process's shared backend (one warm pool per
    worker process and backend options, whatever the number of stages: sandbox/shared_pool.py),
    the tool runner and a thread pool of `workers` threads (the sandbox concurrency by default),
    taken in setup() and given back in teardown()."""

    def __init__(self, backend: str, workers: int | None = None, retries: int = RETRIES,
                 backoff_s: float = BACKOFF_S, options: dict | None = None):
        self.backend_name, self.options = backend, options or {}
        self.workers = workers or concurrency(self.options)
        self.retries, self.backoff_s = retries, backoff_s

    def setup(self):
        self.backend = shared_pool.acquire(self.backend_name, self.options)
        self.runner = ToolRunner(self.backend, self.retries, self.backoff_s)
        self.pool = ThreadPoolExecutor(self.workers)

    def finish_bundle(self):
        report_usage()

    def teardown(self):
        self.pool.shutdown(wait=True)
        report_usage()
        shared_pool.release(self.backend)


def concurrency(options: dict) -> int:
    """The sandbox concurrency of a run: its `pool_size` option, else sandbox/pool.py's default."""
    return int(options.get("pool_size", CONCURRENCY))


_REPORTED: dict[str, float] = {}
_REPORTED_LOCK = threading.Lock()


def report_usage() -> None:
    """This process's sandbox tallies (pools opened, servers started, uid leases, the most uids
    held at once, ms waited for one) added to the counters `sandbox_<name>` by what they grew
    since the last report; the run log sums them over worker processes."""
    with _REPORTED_LOCK:
        now_ = usage.snapshot()
        grown = {name: value - _REPORTED.get(name, 0) for name, value in now_.items()}
        _REPORTED.update(now_)
    for name, delta in grown.items():
        if delta > 0:
            count(f"sandbox_{name}", int(round(delta)))


class _ExecuteBatch(SandboxStage):
    def process(self, batch):
        outputs, errors = execute_batch(batch, self.runner, self.pool)
        for error in errors:
            yield errors_output(error)
        yield from outputs


class Execute(beam.PTransform):
    """Attempts in, attempts with `execution` (the sandbox's result record) and `turns` out."""

    def __init__(self, backend: str = "local", workers: int | None = None, batch_size: int = 64,
                 retries: int = RETRIES, backoff_s: float = BACKOFF_S, options: dict | None = None):
        super().__init__()
        self.backend, self.workers, self.batch_size = backend, workers, batch_size
        self.retries, self.backoff_s, self.options = retries, backoff_s, dict(options or {})

    def expand(self, attempts):
        # Only sandboxed attempts are batched for the thread pool; the rest pass straight through,
        # so every batch keeps all sandbox workers busy.
        sandboxed, direct = attempts | "NeedsSandbox" >> beam.Partition(
            lambda a, n: 0 if get_domain(a.domain).uses_sandbox else 1, 2)
        ran = (sandboxed
               | "Batch" >> beam.BatchElements(min_batch_size=max(1, self.batch_size // 4),
                                               max_batch_size=self.batch_size)
               | "Run" >> beam.ParDo(_ExecuteBatch(self.backend, self.workers, self.retries,
                                                   self.backoff_s, self.options))
               .with_outputs(ERRORS_TAG, main="attempts"))
        passed = direct | "NoSandbox" >> beam.Map(without_execution)
        merged = (ran.attempts, passed) | "Merge" >> beam.Flatten()
        return {"attempts": merged, ERRORS_TAG: ran[ERRORS_TAG]}
