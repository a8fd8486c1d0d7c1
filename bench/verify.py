"""Verification throughput per verifier kind, and the Python unit-test harness vs bare subprocess.

    python bench/verify.py [--n 200] [--workers 2]

Each kind scores `n` responses (correct ones: the domains' demonstrations) through the same path
as `flywheel verify` and the pipeline: execute_batch in the sandbox (for kinds that execute),
verify_attempt, apply_filters. For python_tests the same tests also run under a bare harness:
one `python3 -I -c "<prompt+solution+tests+check()>"` subprocess per response, no sandbox, no
process split, no per-test results; the ratio is what isolation and per-test scoring cost.
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
from flywheel.pipelines.verify_cli import verify_responses  # noqa: E402

KINDS = {"python_tests": "py_functions", "math_answer": "math_linear", "structured": "extract_invoice",
         "sql_result": "sql_shop", "shell_state": "shell_files", "reasoning_gym": "rg_chain_sum"}


def workload(domain_name: str, n: int) -> tuple[list[dict], list[dict]]:
    domain, rng = get_domain(domain_name), random.Random(0)
    tasks = [domain.make_task("train", i, 0) for i in range(n)]
    unique = {t["task_id"]: t for t in tasks}
    responses = [{"task_id": t["task_id"], "response": domain.demonstration(t, rng)} for t in tasks]
    return list(unique.values()), responses


def time_flywheel(tasks, responses, workers: int) -> tuple[float, float]:
    start = time.perf_counter()
    lines = list(verify_responses(tasks, responses, workers=workers))
    elapsed = time.perf_counter() - start
    return elapsed, sum(line["verdict"] == "pass" for line in lines) / len(lines)


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
                  title=f"verification throughput ({os.cpu_count()} cores, {args.workers} workers)")
    for kind, domain in KINDS.items():
        tasks, responses = workload(domain, args.n)
        verify_responses(tasks, responses[:2], workers=args.workers)  # warm caches and imports
        seconds, passed = time_flywheel(tasks, responses, args.workers)
        table.add_row(kind, domain, str(len(responses)), f"{seconds:.2f}",
                      f"{len(responses) / seconds:.1f}", f"{passed:.2f}")
        if kind == "python_tests":
            bare_s, bare_pass = time_bare(tasks, responses, args.workers)
            table.add_row("  bare subprocess", domain, str(len(responses)), f"{bare_s:.2f}",
                          f"{len(responses) / bare_s:.1f}", f"{bare_pass:.2f}")
            table.add_row("  flywheel / bare throughput", "", "", "", f"{bare_s / seconds:.2f}x", "")
    Console().print(table)


if __name__ == "__main__":
    main()
