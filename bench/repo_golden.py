"""The built-in repository suites against their golden trajectories and a do-nothing policy.

    python bench/repo_golden.py [--tasks 100] [--sandbox local|docker] [--seed 0]

For --tasks tasks of each of `repo_bugs` and `repo_terminal` (train split, seed --seed): replay the
golden trajectory call by call through the domain's step in the sandbox, score the final diff
with `repo_tests`; then score the empty answer (doing nothing). Prints solved / total per suite
and defect kind, and the seconds taken. Docker starts a private dockerd (as the tests do).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter

from rich.console import Console
from rich.table import Table


def backend_for(name: str):
    from flywheel.sandbox import get_backend
    if name != "docker":
        return get_backend(name), None
    from flywheel.sandbox.dockerd import PrivateDockerd
    daemon = PrivateDockerd.start(tempfile.mkdtemp(prefix="bench-dockerd-"))
    return daemon.backend(), daemon


def replay(domain, task, runner) -> str:
    from flywheel.domains.tools import ToolCall, render_call
    state = domain.start_state(task)
    for call in task["golden"]:
        step = domain.step(task, state, render_call(ToolCall(call["name"], call["arguments"])), runner)
        state = step.state
        if step.done:
            break
    return domain.final_response(task, state)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from flywheel.domains.registry import get_domain
    from flywheel.domains.tool_runner import ToolRunner
    from flywheel.verifiers import get_verifier
    verify = get_verifier("repo_tests")
    backend, daemon = backend_for(args.sandbox)
    table = Table(title=f"golden trajectories vs doing nothing, {args.tasks} tasks per suite, "
                        f"{args.sandbox} sandbox, seed {args.seed}")
    for column in ("suite", "kind", "golden solved", "do-nothing solved", "seconds"):
        table.add_column(column, justify="right")
    try:
        runner = ToolRunner(backend)
        for name in ("repo_bugs", "repo_terminal"):
            domain, start = get_domain(name), time.perf_counter()
            golden, idle, kinds = Counter(), Counter(), Counter()
            for i in range(args.tasks):
                task = domain.make_task("train", i, args.seed)
                kinds[task["kind"]] += 1
                diff = replay(domain, task, runner)
                golden[task["kind"]] += verify(task, diff, domain.run(backend, task, diff)).reward == 1.0
                idle[task["kind"]] += verify(task, "", domain.run(backend, task, "")).reward > 0
            seconds = time.perf_counter() - start
            for kind in sorted(kinds):
                table.add_row(name, kind, f"{golden[kind]}/{kinds[kind]}", f"{idle[kind]}/{kinds[kind]}", "")
            table.add_row(name, "all", f"{sum(golden.values())}/{args.tasks}",
                          f"{sum(idle.values())}/{args.tasks}", f"{seconds:.0f}")
    finally:
        backend.close()
        if daemon is not None:
            daemon.stop()
    Console().print(table)


if __name__ == "__main__":
    main()
