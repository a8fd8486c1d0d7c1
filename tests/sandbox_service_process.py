"""Real `flywheel sandbox serve` processes on 127.0.0.1 for tests: each started on a free port,
its URL read from the line it prints once it listens, and all of them killed when their block
ends. The session's shared service (tests/conftest.py) and the service-limits tests' own
(tests/sandbox/test_service_limits.py) both start theirs here."""

import contextlib
import subprocess
import sys

import pytest

SERVE = [sys.executable, "-m", "flywheel.cli.main", "sandbox", "serve"]


@contextlib.contextmanager
def services():
    """start(*flags) -> (process, URL) of `flywheel sandbox serve --port 0 FLAGS`; every service
    it started is killed (SIGKILL) when the block ends. The test fails with the service's own
    words when one does not start."""
    started = []

    def start(*flags: str) -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen([*SERVE, "--port", "0", *flags], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        started.append(proc)
        line = proc.stdout.readline()
        if not line.startswith("serving "):
            proc.kill()
            pytest.fail(f"the sandbox service did not start: {line}{proc.communicate()[1][-2000:]}")
        return proc, line.split(" at ")[1].split()[0]

    try:
        yield start
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
