"""Nothing of one attempt reaches the next (issue 10, class 1), on every isolating backend.

Warm `local` attempts are cloned from a long-lived process and share its kernel: the memory they
start from must never have held another attempt's request or output, and no network or IPC state
may survive from one attempt to the next. Cold runs and docker containers start from nothing; the
same tests hold them to it. Fixtures (`isolating`, `sentinel`): tests/conftest.py.
"""

import secrets

import pytest

from flywheel.sandbox import ExecRequest

PREFIX = "fw-leak-"


def scan_memory(tokens: dict[str, str]) -> str:
    """Code that reads every readable mapping of its own process and prints, per name, whether
    PREFIX + token is anywhere in it. The code never holds PREFIX + token in one piece itself: it
    looks for PREFIX and compares what follows it with the token."""
    return f"""import re
P, T = {PREFIX.encode()!r}, {{k: v.encode() for k, v in {tokens!r}.items()}}
found, regions = set(), 0
with open('/proc/self/mem', 'rb', 0) as mem:
    for line in open('/proc/self/maps').read().splitlines():
        fields = line.split()
        if 'r' not in fields[1] or (len(fields) > 5 and fields[5] in ('[vvar]', '[vsyscall]')):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split('-'))
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except (OSError, OverflowError, ValueError):
            continue
        regions += 1
        for m in re.finditer(re.escape(P), data):
            tail = data[m.end():m.end() + 16]
            found.update(k for k, v in T.items() if tail == v)
print('REGIONS', regions)
print('FOUND', sorted(found))
"""


def test_a_warm_attempt_starts_from_memory_that_never_held_another_attempt(isolating, sentinel):
    """Attempt 1 gets a secret in a file (as a harness gets its tests), one on stdin, and prints a
    third (as a harness reports). Attempt 2 reads its whole address space: none may be there."""
    tokens = {name: secrets.token_hex(8) for name in ("file", "stdin", "output")}
    first = ExecRequest(
        {"main.py": f"import sys\nsys.stdin.read()\nprint({PREFIX!r} + {tokens['output']!r})\n",
         "tests.py": f"EXPECTED = {PREFIX + tokens['file']!r}\n"},
        ("python", "main.py"), stdin=PREFIX + tokens["stdin"])
    scan = ExecRequest({"main.py": scan_memory(tokens)}, ("python", "main.py"))
    for _ in range(3):  # back to back, and again once the pool has seen a few
        assert PREFIX + tokens["output"] in isolating.run(first).stdout
        result = isolating.run(scan)
        assert result.exit_code == 0 and "REGIONS" in result.stdout, result
        assert int(result.stdout.split("REGIONS")[1].split()[0]) > 10, result  # it did read
        assert "FOUND []" in result.stdout, result


@pytest.mark.parametrize("table", ["tcp", "tcp6", "udp", "udp6", "unix"])
def test_no_socket_state_survives_an_attempt(isolating, sentinel, table):
    """Attempt 1 leaves a loopback connection in TIME_WAIT (a minute in the kernel, after every
    process is gone), a bound UDP socket and a unix socket; attempt 2 sees an empty table."""
    first = ("import socket\nl = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n"
             "c = socket.create_connection(l.getsockname()); a, _ = l.accept()\n"
             "c.close(); a.close(); l.close()  # the client closes first: TIME_WAIT on its side\n"
             "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('127.0.0.1', 47123))\n"
             "x = socket.socket(socket.AF_UNIX); x.bind('\\0flywheel-left')\n"
             "print(sum(1 for _ in open('/proc/net/tcp')) - 1)")
    second = f"print(open('/proc/net/{table}').read().splitlines()[1:])"
    for _ in range(2):
        ran = isolating.run(ExecRequest({}, ("python", "-c", first)))
        assert ran.exit_code == 0, ran
        if isolating.label != "docker-runsc":  # gVisor's /proc/net lists nothing under --network=none
            assert int(ran.stdout) >= 1, ran  # the state existed in its own run
        result = isolating.run(ExecRequest({}, ("python", "-c", second)))
        assert result.exit_code == 0 and result.stdout.strip() == "[]", result
