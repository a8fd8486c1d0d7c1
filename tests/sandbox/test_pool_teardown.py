"""Closing the warm pool ends everything of its servers, without scanning /proc per server.

A real sandboxed attempt forks a child that starts its own session and forks a grandchild
(`sleep`), and is still running when the pool closes. The server's whole sandbox lives in one pid
namespace; its teardown kills the outer bwrap and reaps the namespace's init, which the kernel
lets happen only once every process of the namespace is gone. Afterwards no process of the
server's leased uid is left, and the /proc scan (supervise._run_processes) never ran.
"""

import os
import threading
import time
from pathlib import Path

import pytest

from flywheel.sandbox import ExecRequest, Limits, SandboxError, get_backend
from flywheel.sandbox import supervise
from flywheel.sandbox.supervise import UidPool, _run_processes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uid leases are taken only as root")

BASE = 62920  # away from other tests' uids (test_uid_leases.py uses 62900-62906)

FORKS_A_GRANDCHILD = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", ["sleep", "300"])
    os._exit(0)
time.sleep(300)
"""


def _sleeping(uid: int) -> bool:
    for pid in _run_processes(None, uid):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() == "sleep":
                    return True
        except OSError:
            pass
    return False


def test_closing_the_pool_leaves_no_process_of_its_uids(monkeypatch):
    backend = _warm_backend(BASE)
    run, outcome = _sleeping_run(backend)
    uids = [s.uid for s in backend._pool.servers]
    assert any(len(_run_processes(None, uid)) >= 4 for uid in uids)  # bwrap, init, server, attempt...
    scans = []
    real = supervise._run_processes
    monkeypatch.setattr(supervise, "_run_processes", lambda *a: scans.append(a) or real(*a))
    backend.close()
    monkeypatch.undo()
    assert {uid: _run_processes(None, uid) for uid in uids} == {uid: {} for uid in uids}
    assert scans == []  # proved by the namespace's init, not by a scan of /proc
    run.join(30)
    assert outcome and isinstance(outcome[0], SandboxError)  # the running attempt was told
    assert all(Path(supervise.LOCK_DIR, str(uid)).read_bytes() == b"0" for uid in uids)  # released


def _warm_backend(base: int):
    """The local backend with a warm pool leasing uids from `base`, or a skip saying why not."""
    try:
        backend = get_backend("local", uid_pool=UidPool(size=4, base=base))
    except SandboxError as e:
        pytest.skip(f"local cannot run here: {e}")
    if not backend.warm:
        backend.close()
        pytest.skip("the warm pool does not start here")
    return backend


def _sleeping_run(backend):
    """(thread, outcome list) of a run of FORKS_A_GRANDCHILD, returned once its `sleep` runs."""
    outcome = []
    run = threading.Thread(target=lambda: outcome.append(_run_catching(backend)))
    run.start()
    deadline = time.monotonic() + 30
    while not any(_sleeping(s.uid) for s in backend._pool.servers):
        assert time.monotonic() < deadline and run.is_alive(), outcome
        time.sleep(0.02)
    return run, outcome


def _run_catching(backend):
    try:
        return backend.run(ExecRequest({}, ("python", "-c", FORKS_A_GRANDCHILD),
                                       limits=Limits(timeout_s=60)))
    except SandboxError as e:
        return e


def test_a_close_while_a_call_reads_tells_it_and_never_closes_its_pipe_under_it(monkeypatch):
    """The race behind a flake: `close` from another thread while a run's call sat between its
    wait and its read closed the pipe under it (OSError EBADF, not a SandboxError; and the number
    could have named another file by the time it read). Made certain here: the run's wait returns
    only after close() has returned. The call must read the dead server's end of file and fail
    as a SandboxError, and the pipes close once it has."""
    from flywheel.sandbox import pool as pool_module
    backend = _warm_backend(BASE + 8)
    running, closed = threading.Event(), threading.Event()
    real_wait = pool_module._wait_readable

    def wait_past_the_close(fd, timeout):
        ready = real_wait(fd, timeout)
        if running.is_set():
            closed.wait(30)
        return ready

    monkeypatch.setattr(pool_module, "_wait_readable", wait_past_the_close)
    run, outcome = _sleeping_run(backend)
    servers = backend._pool.servers
    running.set()
    backend.close()
    assert not any(s.proc.stdout.closed for s in servers)  # a call still holds it
    closed.set()
    run.join(30)
    assert outcome and isinstance(outcome[0], SandboxError), outcome
    assert all(s.proc.stdout.closed and s.proc.stdin.closed for s in servers)  # closed after it
