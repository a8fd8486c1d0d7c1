"""A uid slot whose last holder was killed is leased only once nothing of that holder is left.

As root, each run gets its own host uid (sandbox/supervise.py UidPool), and RLIMIT_NPROC counts
every process of that uid. The kernel frees a killed holder's flock at once, but what ran under
its uid may outlive it for a moment (a warm server's sandbox dying with its owner): the next run
on that uid would find its process budget taken, and bwrap could not even start ("Creating new
namespace failed: Resource temporarily unavailable", seen in CI on a `kill -9` test's heels).
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from flywheel.sandbox import ExecRequest, Limits, SandboxError, get_backend
from flywheel.sandbox import supervise
from flywheel.sandbox.supervise import UidPool, _run_processes, become_subreaper, end_uid

real_scan = _run_processes

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uid leases are taken only as root")

# Each test has uids of its own (62900-62908), away from the pools of other tests: xdist runs
# these tests on different workers at once. Leases of one uid exclude each other on the whole
# machine (one registry), so sharing would only make them wait, never kill each other's runs.
BASE = 62900

HOLDER = textwrap.dedent("""
    import subprocess, sys, time
    from flywheel.sandbox.supervise import UidPool
    with UidPool(size=1, base={base}).lease() as uid:
        for _ in range(6):  # more than the next run's whole process budget
            subprocess.Popen(["setpriv", f"--reuid={{uid}}", f"--regid={{uid}}", "--clear-groups",
                              "sleep", "300"], start_new_session=True)
        print(uid, flush=True)
        time.sleep(300)
""")


def kill_a_holder() -> int:
    """A process that leases the slot, leaves processes under its uid and is SIGKILLed."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(base=BASE)],
                              stdout=subprocess.PIPE, text=True)
    uid = int(holder.stdout.readline())
    holder.kill()
    holder.wait()
    deadline = time.monotonic() + 10  # setpriv takes the uid a moment after it was started
    while len(_run_processes(None, uid)) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_run_processes(None, uid)) >= 6  # left behind, the slot's flock already free
    return uid


def test_the_next_lease_ends_what_a_killed_holder_left():
    uid = kill_a_holder()
    try:
        backend = get_backend("local", uid_pool=UidPool(size=1, base=BASE),
                              warm=False)
    except SandboxError as e:
        pytest.skip(f"local cannot run here: {e}")
    try:
        code = "import threading, time\nfor _ in range(8): threading.Thread(target=time.sleep, args=(1,)).start()"
        result = backend.run(ExecRequest({"main.py": code}, ("python", "main.py"),
                                         limits=Limits(processes=4)))
        stderr, reason = result.stderr, result.kill_reason
        # The run had its whole budget: it is refused its own fifth thread, nothing before.
        assert "can't start new thread" in stderr and reason is None, stderr
        # nothing of the uid still runs (a zombie a parent has yet to reap holds nothing: CI's
        # loaded machine once showed two, exited, their reap owed by a process outside the run)
        assert [pid for pid, zombie in _run_processes(None, uid).items() if not zombie] == []
        # The slot serves the next run.
        assert backend.run(ExecRequest({}, ("python", "-c", "print(1)"))).stdout == "1\n"
    finally:
        backend.close()


def test_a_clean_release_needs_no_sweep():
    """The mark is cleared when a lease ends normally, and set again by the next."""
    pool = UidPool(size=1, base=BASE + 1)
    with pool.lease() as uid:
        assert _mark(pool, uid) == b"1"
    assert _mark(pool, uid) == b"0"


def _mark(pool, uid) -> bytes:
    with open(os.path.join(pool.lock_dir, str(uid)), "rb") as f:
        return f.read()


ZOMBIE_MAKER = textwrap.dedent("""
    import os, sys, time
    pid = os.fork()
    if pid == 0:  # a child under the slot's uid that exits at once: a zombie this process never reaps
        os.setgid({uid}); os.setuid({uid}); os._exit(0)
    print(pid, flush=True)
    time.sleep(300)
""")


def test_a_slot_whose_zombies_another_process_owes_is_passed_over(monkeypatch):
    """Another process (a pytest worker holding its dead sandboxes' zombies) owes a wait to two
    zombies under a slot's uid, and the slot is marked held. A lease cannot reap them, and they
    count against the uid's process limit: it takes the next slot, and the pool passes that slot
    over on its next leases rather than trying it again."""
    become_subreaper()  # the owners' zombies come to this process when they die, whichever
    pool = UidPool(size=2, base=BASE + 2)
    poisoned, other = pool.uids
    owners = [subprocess.Popen([sys.executable, "-c", ZOMBIE_MAKER.format(uid=poisoned)],
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        zombies = [int(owner.stdout.readline()) for owner in owners]
        deadline = time.monotonic() + 10
        while sorted(p for p, z in _run_processes(None, poisoned).items() if z) != sorted(zombies):
            assert time.monotonic() < deadline, _run_processes(None, poisoned)
            time.sleep(0.05)
        with open(os.path.join(pool.lock_dir, str(poisoned)), "wb") as f:
            f.write(b"1")  # marked held: its holder did not end cleanly
        assert [_lease_once(pool) for _ in range(3)] == [[other]] * 3
        assert poisoned in pool._skipped and _mark(pool, poisoned) == b"1"
        # A new pool of this process (each backend has its own) passes it over too, without
        # scanning /proc for it again: it was half a second of scans per new backend per slot.
        scanned = []
        monkeypatch.setattr(supervise, "_run_processes",
                            lambda pgid, uid: scanned.append(uid) or real_scan(pgid, uid))
        assert _lease_once(UidPool(size=2, base=BASE + 2)) == [other]
        assert poisoned not in scanned
        monkeypatch.undo()
    finally:
        for owner in owners:
            owner.kill()
            owner.wait()
    assert end_uid(poisoned)  # their parent gone, the zombies went with it


def _lease_once(pool):
    with pool.lease() as uid:
        return [uid]


def test_an_exhausted_pool_says_its_limit_instead_of_waiting_for_good():
    """Two slots, both held: a third lease waits its timeout, then fails naming the limit, who
    holds the slots and the settings that change it; the held slots are untouched."""
    pool = UidPool(size=2, base=BASE + 4, timeout_s=0.2)
    with pool.lease() as first, pool.lease() as second:
        with pytest.raises(SandboxError) as refused:
            _lease_once(pool)
        assert _mark(pool, first) == _mark(pool, second) == b"1"
    message = str(refused.value)
    for said in ("within 0.2 s", "all 2 uid slots", "2 locked now, 2 by this process",
                 "pool_size", "uid_slots", "lease_timeout_s"):
        assert said in message, message
    assert _lease_once(pool) == [first]  # free again once released


OTHER_PROCESS_LEASE = textwrap.dedent("""
    from flywheel.sandbox.supervise import UidPool
    from flywheel.sandbox.contract import SandboxError
    try:
        with UidPool(size=1, base={base}, timeout_s=0.3).lease() as uid:
            print("leased", uid)
    except SandboxError as e:
        print("refused", e)
""")


def test_a_uid_in_use_is_never_leased_by_another_process_whatever_its_tmpdir(tmp_path):
    """The uid-lease flake (a run's bwrap SIGKILLed before it wrote its exit status): two leases
    of one uid at once, each pool sure it owned it, and the second ended "what the last holder
    left" (or swept the uid after a timeout), killing the first's run. The slot registry was a
    folder under $TMPDIR (or any lock_dir a caller chose), while kills act on the uid machine-wide.
    A process with another TMPDIR, where a killed holder once left the slot marked held, must be
    refused the uid this process holds, and what runs under it must live on."""
    pool = UidPool(size=1, base=BASE + 8)
    with pool.lease() as uid:
        run = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                                "sleep", "60"], start_new_session=True)
        try:
            deadline = time.monotonic() + 10  # setpriv takes the uid a moment after it started
            while run.pid not in _run_processes(None, uid):
                assert time.monotonic() < deadline
                time.sleep(0.02)
            elsewhere = tmp_path / "flywheel-sandbox-uids"  # a registry where TMPDIR points
            elsewhere.mkdir(mode=0o700)
            (elsewhere / str(uid)).write_bytes(b"1")  # held: its holder there was killed
            other = subprocess.run([sys.executable, "-c", OTHER_PROCESS_LEASE.format(base=uid)],
                                   env={**os.environ, "TMPDIR": str(tmp_path)},
                                   capture_output=True, text=True, timeout=60)
            assert other.stdout.startswith("refused no sandbox uid free"), other.stdout + other.stderr
            assert run.poll() is None, "the other process's lease killed this one's run"
        finally:
            run.kill()
            run.wait()


def test_the_scan_finds_a_process_of_the_uid_whatever_name_it_gives_itself():
    """The /proc scan reads Uid, NSpgid and State from each status file by name. A sandboxed
    process that names itself like those fields (its name is the file's first line) is still
    found under its own uid, and is not taken for root's."""
    uid = BASE + 9
    forged = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'x\\nUid:\\t0\\nState:', 0, 0, 0); time.sleep(60)"
    run = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            sys.executable, "-c", forged], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not _comm(run.pid).startswith("x\\nUid"):  # the kernel shows the newline escaped
            assert time.monotonic() < deadline, _comm(run.pid)
            time.sleep(0.05)
        assert _run_processes(None, uid) == {run.pid: False}
        assert run.pid not in _run_processes(None, 0)
    finally:
        run.kill()
        run.wait()


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/status") as f:
        return f.readline().removeprefix("Name:\t")
