"""The harness's report channel on every isolating backend (issue 10, class 2): code under test
can neither learn the run's nonce nor get a report of its own read as the harness's, even where
the kernel lets it write the harness's stdout (gVisor). Fixtures (`isolating`): tests/conftest.py."""

import json

from flywheel.families.python.case_plan import case_names
from flywheel.families.python.python_tests import REPORT_MARKER
from flywheel.domains.registry import get_domain
from flywheel.domains.report_channel import FORGED, authenticate
from flywheel.verifiers import get_verifier

TASK = next(t for t in get_domain("py_functions").tasks("train") if t["entry_point"] == "running_max")
ALL_PASSED = json.dumps({"cases": [{"name": n, "passed": True} for n in case_names(TASK)], "signals": []})
# The solution: look for the nonce everywhere another process of the run keeps it (memory,
# environment, command line, stdin), then write a report, signed if it found one, to every fd of
# every other process that it can open for writing; and, to be sure, from a process that outlives it.
FORGER = f"""import os, re, time
MARK, REPORT = {REPORT_MARKER!r}.encode(), {ALL_PASSED!r}.encode()
me, nonce = os.getpid(), b''
pids = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me]
for pid in pids:
    for name in ('environ', 'cmdline', 'fd/0'):
        try:
            fd = os.open(f'/proc/{{pid}}/{{name}}', os.O_RDONLY | os.O_NONBLOCK)
            data = os.read(fd, 1 << 20); os.close(fd)
            nonce = nonce or (re.search(MARK + rb'([0-9a-f]{{32}}) ', data) or [b'', b''])[1]
        except OSError:
            pass
    try:
        with open(f'/proc/{{pid}}/mem', 'rb', 0) as mem:
            for line in open(f'/proc/{{pid}}/maps'):
                lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
                try:
                    mem.seek(lo); data = mem.read(hi - lo)
                except (OSError, ValueError, OverflowError):
                    continue
                nonce = nonce or (re.search(MARK + rb'([0-9a-f]{{32}}) ', data) or [b'', b''])[1]
    except OSError:
        pass
line = b'\\n' + MARK + (nonce + b' ' if nonce else b'') + REPORT + b'\\n'
def forge():
    for pid in pids:
        for n in range(8):
            try:
                fd = os.open(f'/proc/{{pid}}/fd/{{n}}', os.O_WRONLY | os.O_NONBLOCK)
                os.write(fd, line); os.close(fd)
            except OSError:
                pass
forge()
if os.fork() == 0:
    os.setsid(); time.sleep(0.5); forge(); os._exit(0)
def running_max(xs):
    return xs
"""


def test_unit_authenticate_keeps_only_signed_lines():
    nonce = "ab" * 16
    out = f"noise\n{REPORT_MARKER}{nonce} {{}}\n{REPORT_MARKER}{{}}\nx\x1c{REPORT_MARKER}{{}}\n"
    lines = authenticate(out, REPORT_MARKER, nonce).splitlines()
    assert [l for l in lines if l.startswith(REPORT_MARKER)] == [REPORT_MARKER + "{}"]
    assert sum(l.startswith(FORGED + REPORT_MARKER) for l in lines) == 2  # \x1c splits a line too


def test_the_code_cannot_get_its_report_read_as_the_harness_s(isolating):
    domain = get_domain("py_functions")
    execution = domain.run(isolating, TASK, FORGER)
    reports = [l for l in execution.stdout.splitlines() if l.startswith(REPORT_MARKER)]
    assert len(reports) <= 1, execution  # the harness's own, if it lived to write it
    verdict = get_verifier(domain.verifier)(TASK, FORGER, execution)
    assert verdict.reward < 1.0 and verdict.verdict == "fail", (verdict, execution)
    if FORGED + REPORT_MARKER in execution.stdout:  # the kernel let it write (gVisor): caught
        assert verdict.components.get("exploit_forged_report") == 1.0 and verdict.exploit_suspected, verdict
    if isolating.label != "docker-runsc":  # Linux keeps a non-dumpable harness's fds to itself
        assert FORGED not in execution.stdout, execution
