"""Verification throughput per verifier kind, and the Python unit-test harness vs bare subprocess.

    python bench/verify.py [--n 200] [--workers 2]

Each kind scores `n` responses (correct ones: the domains' demonstrations) through the same path
as `flywheel verify` and the pipeline: execute_batch in the sandbox (for kinds that execute),
verify_attempt, apply_filters. For python_tests the same tests also run under a bare harness:
one `python3 -I -c "<prompt+solution+tests+check()>"` subprocess per response, no sandbox, no
process split, no per-test results; the ratio is what isolation and per-test scoring cost.

Every verification runs in a bounded worker process (flywheel.verifiers.bounded); the last two
columns set the verifier alone in this process (unbounded) beside the same calls through the
worker, on the same executed attempts, so their ratio is what the bound costs per verification.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from flywheel.domains.registry import get_domain  # noqa: E402
from flywheel.cli.verify import attempt_of, verify_responses  # noqa: E402
from flywheel.sandbox import get_backend  # noqa: E402
from flywheel.domains.tool_runner import ToolRunner  # noqa: E402
from flywheel.transforms.execute import execute_batch  # noqa: E402
from flywheel.verifiers import get_verifier  # noqa: E402
from flywheel.verifiers.bounded import BoundedVerifier  # noqa: E402

KINDS = {"python_tests": "py_functions", "math_answer": "math_linear", "structured": "extract_invoice",
         "sql_result": "sql_shop", "shell_state": "shell_files", "reasoning_gym": "rg_chain_sum"}


def workload(domain_name: str, n: int) -> tuple[list[dict], list[dict]]:
    domain, rng = get_domain(domain_name), random.Random(0)
    tasks = [domain.make_task("train", i, 0) for i in range(n)]
    unique = {t["task_id"]: t for t in tasks}
    responses = [{"task_id": t["task_id"], "response": domain.demonstration(t, rng)} for t in tasks]
    return list(unique.values()), responses


def time_flywheel(tasks, responses, workers: int, bounded: BoundedVerifier) -> tuple[float, float]:
    start = time.perf_counter()
    lines = list(verify_responses(tasks, responses, workers=workers, bounded=bounded))
    elapsed = time.perf_counter() - start
    return elapsed, sum(line["verdict"] == "pass" for line in lines) / len(lines)


def time_verifier_alone(tasks, responses, workers: int, bounded: BoundedVerifier) -> tuple[float, float]:
    """(verifications/s in this process, through the worker) on the same executed attempts."""
    by_id = {t["task_id"]: t for t in tasks}
    attempts = [attempt_of(by_id[r["task_id"]], r["response"], i) for i, r in enumerate(responses)]
    with get_backend("local") as backend, ThreadPoolExecutor(workers) as pool:
        executed, _ = execute_batch(attempts, ToolRunner(backend), pool)
    verifier = get_verifier(get_domain(executed[0].domain).verifier)
    for a in executed:  # the worker's caches are warm from the run above: warm this process's too
        verifier(a.task, a.response, a.execution)
    rates = []
    for call in (verifier, lambda *a: bounded.run(verifier, *a)):
        start = time.perf_counter()
        for a in executed:
            call(a.task, a.response, a.execution)
        rates.append(len(executed) / (time.perf_counter() - start))
    return rates[0], rates[1]


def bare_program(task: dict, response: str) -> str:
    checks = "".join(f"{task[f]}\ncheck({task['entry_point']})\n" for f in ("visible_test", "test")
                     if task.get(f))
    return f"{task['prompt']}{response}\n\n{checks}"


def time_bare(tasks, responses, workers: int) -> tuple[float, float]:
    by_id = {t["task_id"]: t for t in tasks}

    def run(row):
        program = bare_program(by_id[row["task_id"]], row["response"])
        done = subprocess.run(["/usr/bin/python3", "-I", "-c", program], capture_output=True, timeout=10)
        return done.returncode == 0

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = list(pool.map(run, responses))
    return time.perf_counter() - start, sum(ok) / len(ok)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=200, help="responses per kind")
    p.add_argument("--workers", type=int, default=2, help="sandbox runs in parallel")
    args = p.parse_args()
    table = Table("kind", "domain", "responses", "seconds", "verifications/s", "pass rate",
                  "verifier alone/s", "in bounded worker/s",
                  title=f"verification throughput ({os.cpu_count()} cores, {args.workers} workers)")
    bounded = BoundedVerifier()
    start = time.perf_counter()
    bounded.run(get_verifier("exact_match"), {"answer": "1"}, "1")
    Console().print(f"bounded worker started in {time.perf_counter() - start:.2f} s")
    for kind, domain in KINDS.items():
        tasks, responses = workload(domain, args.n)
        list(verify_responses(tasks, responses[:2], workers=args.workers, bounded=bounded))  # warm caches
        seconds, passed = time_flywheel(tasks, responses, args.workers, bounded)
        alone, worker = time_verifier_alone(tasks, responses, args.workers, bounded)
        table.add_row(kind, domain, str(len(responses)), f"{seconds:.2f}",
                      f"{len(responses) / seconds:.1f}", f"{passed:.2f}", f"{alone:.0f}", f"{worker:.0f}")
        if kind == "python_tests":
            bare_s, bare_pass = time_bare(tasks, responses, args.workers)
            table.add_row("  bare subprocess", domain, str(len(responses)), f"{bare_s:.2f}",
                          f"{len(responses) / bare_s:.1f}", f"{bare_pass:.2f}")
            table.add_row("  flywheel / bare throughput", "", "", "", f"{bare_s / seconds:.2f}x", "")
    bounded.close()
    Console().print(table)


if __name__ == "__main__":
    main()
