"""A real `flywheel sandbox serve` process on 127.0.0.1 for tests: started on a free port, its URL
read from the line it prints once it listens. The session's shared service (tests/conftest.py)
and the service-limits tests' own (tests/sandbox/test_service_limits.py) both start theirs here."""

import subprocess
import sys

import pytest

SERVE = [sys.executable, "-m", "flywheel.cli.main", "sandbox", "serve"]


def start_service(*flags: str) -> tuple[subprocess.Popen, str]:
    """(process, URL) of `flywheel sandbox serve --port 0 FLAGS`, for the caller to kill; the test
    fails with the service's own words when it does not start."""
    proc = subprocess.Popen([*SERVE, "--port", "0", *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        pytest.fail(f"the sandbox service did not start: {line}{proc.communicate()[1][-2000:]}")
    return proc, line.split(" at ")[1].split()[0]
