"""Sandbox throughput: attempts/s per backend, side by side with a bare `subprocess` Python.

    python bench/sandbox.py [--attempts 60] [--rounds 5] [--docker] [--docker-host unix:///path/docker.sock]
                            [--remote-url LABEL=URL ...]

Two tasks: `print(1)`, and a small test-running task (a solution and three unittest cases, run
with `python -m unittest`). Backends: bare subprocess (no isolation at all: the baseline), `local`
cold (one bwrap per attempt), `local` warm pool, the same pool behind a sandbox service on
loopback (`remote`; --no-remote skips it; $FLYWHEEL_SANDBOX_TOKEN, when set, is required by that
service and sent by its client), services already running elsewhere (--remote-url: say another
version of the service, side by side in one run), and with --docker the `docker` backend (a
private dockerd is started, and stopped, unless --docker-host names one). Each row gives
attempts/s with one worker, the ratio to bare subprocess, attempts/s with 2 concurrent workers,
and the CPU time the whole machine spent per `print(1)` attempt (all processes and kernel threads, from
/proc/stat) with 1 and with 2 workers: where one worker already keeps more than one core busy
(the warm pool prepares the next attempt while one runs), 2 workers cannot double on 2 cores,
and an unchanged CPU per attempt is what says that they scale with the cores there are. A
second table gives that scaling directly: one worker process confined to one core (with all it
starts) against 2 worker processes with a core each, as Beam runs its worker processes.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flywheel.sandbox import ExecRequest, get_backend

TASKS = {
    "print(1)": ExecRequest({"main.py": "print(1)"}, ("python", "main.py")),
    "unittest": ExecRequest({
        "solution.py": "def add(a, b):\n    return a + b\n",
        "test_solution.py": "import unittest\nfrom solution import add\n\nclass T(unittest.TestCase):\n"
                            + "".join(f"    def test_{i}(self):\n        self.assertEqual(add({i}, 1), {i + 1})\n"
                                      for i in range(3))}, ("python", "-m", "unittest", "-q")),
}


class BareSubprocess:
    """The baseline: write the files to a temp dir and run the system Python there, no isolation."""

    name = "bare subprocess"

    def run(self, request: ExecRequest):
        with tempfile.TemporaryDirectory() as workdir:
            for name, text in request.files.items():
                Path(workdir, name).write_text(text)
            command = ["/usr/bin/python3", "-I", "-B", *request.command[1:]]
            out = subprocess.run(command, cwd=workdir, capture_output=True, text=True,
                                 timeout=request.limits.timeout_s)
            return out

    def close(self):
        pass


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (every process, kernel threads)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle and iowait


def rate(backend, request: ExecRequest, attempts: int, workers: int) -> tuple[float, float]:
    """(attempts per second, machine CPU ms per attempt) over `attempts` runs on `workers`
    threads, after one warm-up each."""
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(backend.run, [request] * workers))
        start, busy = time.perf_counter(), busy_seconds()
        results = list(pool.map(backend.run, [request] * attempts))
    elapsed, cpu = time.perf_counter() - start, busy_seconds() - busy
    for r in results:
        code = getattr(r, "exit_code", getattr(r, "returncode", None))
        assert code == 0, r
    return attempts / elapsed, 1000 * cpu / attempts


LOCAL = {"bare subprocess": BareSubprocess, "local cold": lambda: get_backend("local", warm=False),
         "local warm pool": lambda: get_backend("local")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--attempts", type=int, default=60, help="per backend, task and worker count")
    p.add_argument("--rounds", type=int, default=5,
                   help="the attempts are split into rounds that visit every backend in turn; "
                        "each figure is the median over rounds (a noisy machine then moves all "
                        "backends alike)")
    p.add_argument("--docker", action="store_true", help="also bench the docker backend")
    p.add_argument("--docker-host", default=None)
    p.add_argument("--no-remote", action="store_true",
                   help="skip `remote`: the warm pool behind `flywheel sandbox serve` on loopback")
    p.add_argument("--remote-url", action="append", default=[], metavar="LABEL=URL",
                   help="also bench `remote` against a sandbox service already running at URL "
                        "(a row named `remote LABEL`; the token from $FLYWHEEL_SANDBOX_TOKEN)")
    p.add_argument("--one-core", default=None, help=argparse.SUPPRESS)  # internal: see pinned_rate
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.one_core:  # a pinned worker process: see pinned_rate
        name, core = args.one_core.rsplit(":", 1)
        os.sched_setaffinity(0, {int(core)})  # inherited by all it starts (the pool's servers too)
        backend = LOCAL[name]()
        try:
            for _ in range(3):
                backend.run(TASKS["print(1)"])
            print("ready", flush=True)
            sys.stdin.readline()
            for _ in range(args.attempts):
                backend.run(TASKS["print(1)"])
            print("done", flush=True)
        finally:
            backend.close()
        return
    makers = [(name, make, 1) for name, make in LOCAL.items()]
    daemon, service = None, None
    if not args.no_remote:
        service = subprocess.Popen([sys.executable, "-m", "flywheel.cli.main", "sandbox", "serve",
                                    "--port", "0", "--capacity", "4"], stdout=subprocess.PIPE, text=True)
        remote_url = service.stdout.readline().split(" at ")[1].split()[0]
        makers.append(("remote (loopback) warm pool", lambda: get_backend("remote", urls=remote_url), 1))
    for item in args.remote_url:
        label, url = item.split("=", 1)
        makers.append((f"remote {label}", lambda url=url: get_backend("remote", urls=url), 1))
    if args.docker:
        url = args.docker_host
        if url is None:
            from flywheel.sandbox.dockerd import PrivateDockerd
            daemon = PrivateDockerd.start(tempfile.mkdtemp(prefix="flywheel-bench-dockerd-"))
            url = daemon.url
            daemon.backend().close()  # builds the image when missing
        makers.append(("docker", lambda: get_backend("docker", base_url=url), 4))  # 1/4 the attempts
        if daemon is not None and daemon.runtimes:
            makers.append(("docker runsc", lambda: get_backend("docker", base_url=url, runtime="runsc"), 4))
    runs = [(t, 1) for t in TASKS] + [("print(1)", 2)]
    cpus = sorted(os.sched_getaffinity(0))
    scale = len(cpus) >= 2
    figures: dict[tuple, list[tuple[float, float]]] = {}
    backends = []
    try:
        for name, make, divisor in makers:
            backends.append((name, make(), divisor))
        for _ in range(args.rounds):
            for name, backend, divisor in backends:
                for task, workers in runs:
                    attempts = max(args.attempts // args.rounds // divisor, 2 * workers)
                    figures.setdefault((name, task, workers), []).append(
                        rate(backend, TASKS[task], attempts, workers))
                if name in LOCAL and scale:
                    for cores in (cpus[:1], cpus[:2]):  # whole processes: long enough to even out
                        figures.setdefault((name, "pinned", len(cores)), []).append(
                            (pinned_rate(name, cores, max(args.attempts // 2, 2)), 0.0))
    finally:
        for _, backend, _ in backends:
            backend.close()
        if daemon is not None:
            daemon.stop()
        if service is not None:
            service.terminate()
            service.wait()
    med = {key: (statistics.median(r for r, _ in values), statistics.median(c for _, c in values))
           for key, values in figures.items()}
    table = Table("backend", *[f"{t} /s" for t in TASKS], *[f"{t} x bare" for t in TASKS],
                  "print(1) /s, 2 workers", "2 workers / 1", "CPU ms/attempt, 1 worker",
                  "CPU ms/attempt, 2 workers",
                  title=f"sandbox attempts/s ({os.cpu_count()} cores, median of {args.rounds} rounds)")
    bare = {t: med[("bare subprocess", t, 1)][0] for t in TASKS}
    for name, _, _ in backends:
        one = {t: med[(name, t, 1)][0] for t in TASKS}
        two, cpu_two = med[(name, "print(1)", 2)]
        table.add_row(name, *[f"{one[t]:.1f}" for t in TASKS], *[f"{one[t] / bare[t]:.2f}x" for t in TASKS],
                      f"{two:.1f}", f"{two / one['print(1)']:.2f}x",
                      f"{med[(name, 'print(1)', 1)][1]:.1f}", f"{cpu_two:.1f}")
    Console(width=170).print(table)
    if scale:
        scaling = Table("backend", "print(1) /s, 1 worker process on 1 core",
                        "print(1) /s, 2 worker processes, a core each", "ratio",
                        title="scaling: a core per worker process (medians over the same rounds)")
        for name in LOCAL:
            one, two = med[(name, "pinned", 1)][0], med[(name, "pinned", 2)][0]
            scaling.add_row(name, f"{one:.1f}", f"{two:.1f}", f"{two / one:.2f}x")
        Console(width=170).print(scaling)


def pinned_rate(name: str, cores: list[int], attempts: int) -> float:
    """print(1) attempts/s of one worker process per core in `cores`, each confined with all it
    starts (the warm pool's servers too) to its core, started together after their warm-up: how
    a backend scales when workers are processes with a core each (Beam's worker processes)."""
    procs = [subprocess.Popen([sys.executable, __file__, "--one-core", f"{name}:{core}",
                               "--attempts", str(attempts)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for core in cores]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready", f"{name} worker failed to start"
        start = time.perf_counter()
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdout.readline().strip() == "done", f"{name} worker failed"
        return attempts * len(procs) / (time.perf_counter() - start)
    finally:
        for proc in procs:
            proc.stdin.close()
            proc.wait()


if __name__ == "__main__":
    main()
