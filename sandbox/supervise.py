"""One supervised child per run: the machinery under the `local` and `unsafe-subprocess` backends.

A run is one exec'd command line behind util-linux's prlimit (rlimits) and setpriv (no new
privileges; as root, a leased unprivileged uid), in a new session, with capped output read
without unbounded buffering, a wall-clock deadline, and a kill of everything the run left behind.
"""

from __future__ import annotations

import abc
import contextlib
import ctypes
import fcntl
import functools
import os
import pwd
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from flywheel.sandbox.contract import (
    ExecRequest, ExecResult, Limits, SandboxBackend, SandboxError, cpu_seconds, decode_output,
    encode_text, resolve_command)
from flywheel.sandbox import usage
from flywheel.sandbox.exit_status import kill_reason

_CHUNK = 65536
SANDBOX_PATH = "/usr/bin:/bin"
UID_SLOTS = 256  # machine-wide slots (uids base..base+255); the sandbox option uid_slots
LEASE_TIMEOUT_S = 60.0  # the longest a run waits for a free slot; the option lease_timeout_s
# The one registry of slots on this machine: a fixed path, never one under $TMPDIR (or one a caller
# picks), since kills act on the uid machine-wide. The path earlier versions used with TMPDIR unset,
# so that they and this one exclude each other too.
LOCK_DIR = "/tmp/flywheel-sandbox-uids"


class UidPool:
    """Leases each concurrent run its own unprivileged uid, `base + slot`.

    A slot is held by an exclusive flock on a file named after it. Every lease opens its own file
    description, so flock excludes other threads *and* other processes on the machine (Beam runs
    one SDK worker process per core), and the kernel releases a slot whose holder died. Uids that
    name a user of the host are skipped: the backend kills every process of a leased uid.

    The kernel releases a dead holder's flock at once, but not what ran under its uid: a warm
    server's sandbox takes a moment to die with its killed owner, and until it is gone its
    processes count against the uid's RLIMIT_NPROC (the next run's bwrap cannot even start). So a
    lease marks its file held and clears the mark only when it ends cleanly; the next lease of a
    slot still marked ends what is left under the uid first, or skips the slot if it cannot.

    That kill, and kill_run's sweep of a run's uid, act on every process of the uid on the machine:
    they are safe only because the lock files are the machine's one registry (LOCK_DIR, the same
    for every process whatever its TMPDIR, and not a parameter). Two registries let two holders
    lease one uid at once, and one's sweep SIGKILLed the other's bwrap before it wrote its exit
    status (the uid-lease flake: tests/sandbox/test_uid_leases.py).

    A lease waits for a free slot at most `timeout_s` (the sandbox option `lease_timeout_s`), then
    raises a SandboxError naming the limit: how many slots, how many held and by how many
    processes, and the settings that change it. It never waits without end.
    """

    def __init__(self, size: int = UID_SLOTS, base: int = 61000, timeout_s: float = LEASE_TIMEOUT_S):
        users = {entry.pw_uid for entry in pwd.getpwall()}
        self.uids = [uid for uid in range(base, base + size) if uid not in users]
        self.timeout_s = timeout_s
        self._skipped = _SKIPPED  # every pool of the process: a new backend need not retry them
        self.lock_dir = LOCK_DIR
        os.makedirs(self.lock_dir, mode=0o700, exist_ok=True)
        st = os.lstat(self.lock_dir)  # refuse a dir a sandboxed uid planted first (in /tmp)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise SandboxError(f"uid lock dir {self.lock_dir} is not a private dir of this user")

    @contextlib.contextmanager
    def lease(self):
        uid, fd = self._take()
        usage.tally("uid_leases")
        usage.hold("uids_held", +1)
        try:
            yield uid
        except BaseException:
            os.close(fd)  # still marked: the next holder makes sure nothing is left
            raise
        else:
            os.pwrite(fd, _FREE, 0)
            os.close(fd)
        finally:
            usage.hold("uids_held", -1)

    def _take(self) -> tuple[int, int]:
        """(uid, its locked and marked file) of a free slot; SandboxError past `timeout_s`."""
        start = time.monotonic()
        pause, waited = 0.01, False
        while True:
            now = time.monotonic()
            fresh = [u for u in self.uids if now - self._skipped.get(u, -SKIP_S) >= SKIP_S]
            for uid in fresh or self.uids:
                path = os.path.join(self.lock_dir, str(uid))
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                if os.pread(fd, 1, 0) == _HELD and not end_uid(uid):
                    os.close(fd)  # leftovers we cannot end (yet): another slot, and not this
                    self._skipped[uid] = time.monotonic()  # one again for a while
                    continue
                os.pwrite(fd, _HELD, 0)
                if waited:
                    usage.tally("uid_wait_ms", (time.monotonic() - start) * 1000)
                return uid, fd
            if time.monotonic() - start >= self.timeout_s:
                raise SandboxError(self.exhausted())
            time.sleep(pause)  # every slot busy: wait for a run to finish
            pause, waited = min(pause * 2, 0.2), True

    def exhausted(self) -> str:
        """Why no slot was free: the limit, who holds the slots, and what to change."""
        held = lock_holders(self.lock_dir, self.uids)
        mine = sum(pid == os.getpid() for pid in held.values())
        others = len({pid for pid in held.values() if pid != os.getpid()})
        return (f"no sandbox uid free within {self.timeout_s:g} s: all {len(self.uids)} uid slots "
                f"({self.uids[0]}-{self.uids[-1]}, lock files in {self.lock_dir}) are held; "
                f"{len(held)} locked now, {mine} by this process and {len(held) - mine} by "
                f"{others} other process(es); lower the runs' sandbox concurrency "
                f"(--sandbox-option pool_size=N, or fewer workers), or raise the slots "
                f"(--sandbox-option uid_slots=N) or the wait (--sandbox-option lease_timeout_s=S)")


def lock_holders(lock_dir: str, uids) -> dict[int, int]:
    """uid -> pid of the process holding its slot's flock now, read from /proc/locks (once, only
    to explain an exhausted pool)."""
    inodes = {}
    for uid in uids:
        with contextlib.suppress(OSError):
            inodes[os.stat(os.path.join(lock_dir, str(uid))).st_ino] = uid
    holders = {}
    with contextlib.suppress(OSError), open("/proc/locks") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] == "WRITE":
                inode = int(fields[5].rsplit(":", 1)[-1])
                if inode in inodes:
                    holders[inodes[inode]] = int(fields[4])
    return holders


_HELD, _FREE = b"1", b"0"
SKIP_S = 30.0  # a slot whose leftovers could not be ended is tried again after this


# uid -> when its leftovers last could not be ended, for every UidPool of this process (each
# backend has its own pool; each retried the same stuck slots, half a second of scans each).
_SKIPPED: dict[int, float] = {}

ZOMBIE_GRACE_S = 0.5  # how long zombies may take to be reaped by their parent


def end_uid(uid: int, wait_s: float = 5.0) -> bool:
    """SIGKILL every process running as `uid` and reap those we adopted; True once none is left,
    False if some still are after `wait_s`.

    A zombie whose parent is another process (an orphan that process adopted as subreaper) cannot
    be reaped here, and it still counts against the uid's process limit. Its parent usually
    reaps it within milliseconds; one that has not within ZOMBIE_GRACE_S may never (a pytest
    worker holding its dead sandboxes' zombies): False then, at once, rather than after `wait_s`
    (which stalled every lease five seconds per such slot)."""
    start, pause = time.monotonic(), 0.005
    while True:
        procs = _run_processes(None, uid)
        if not procs:
            return True
        live = _kill_and_reap(procs, os.WNOHANG)
        waited = time.monotonic() - start
        if waited > wait_s or (not live and waited > ZOMBIE_GRACE_S):
            return False
        time.sleep(pause)  # backing off: a scan costs ~10-25 ms of CPU on a busy host
        pause = min(pause * 2, 0.1)


def become_subreaper() -> None:
    """Adopt orphans of our sandboxes so we can reap them: zombies left to a PID 1 that does not
    reap (as in many containers) would count against a slot uid's RLIMIT_NPROC forever."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def which(program: str) -> str:
    """The absolute path of `program` on the sandbox's PATH; a missing one is our failure."""
    found = shutil.which(program, path=SANDBOX_PATH)
    if found is None:
        raise SandboxError(f"{program!r} not found on {SANDBOX_PATH}")
    return found


def limited(command: list[str], limits: Limits, uid: int | None, tools: dict, extra_procs=0,
            pid_1: bool = False):
    """`command` behind prlimit (rlimits) and setpriv (no new privileges, and as root: drop to
    `uid` with no groups); `pid_1`: the command is its pid namespace's init, which the kernel
    spares SIGXCPU, so the CPU limit is a SIGKILL at the limit itself. Exec'd wrappers, not a Popen preexec_fn: a preexec_fn forces fork()
    instead of vfork(), and fork() runs the parent's atfork handlers in the child, where gRPC's
    (every Beam worker has it) abort the child now and then."""
    cpu, memory, fsize = cpu_seconds(limits), limits.memory_mb << 20, limits.file_size_mb << 20
    argv = [tools["prlimit"], f"--as={memory}", f"--cpu={cpu}:{cpu if pid_1 else cpu + 1}",  # SIGXCPU, SIGKILL
            f"--fsize={fsize}", f"--nofile={limits.open_files}", "--core=0",
            f"--nproc={limits.processes + extra_procs}", "--", tools["setpriv"], "--no-new-privs"]
    if uid is not None:
        argv += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return argv + ["--"] + command


def _run_processes(pgid: int | None, uid: int | None) -> dict[int, bool]:
    """pid -> is_zombie for every process of one run: its process group, and its uid if it has one
    (a child that called setsid() left the group but cannot leave its uid).

    A scan reads every /proc/PID/status on the machine, so it is kept cheap: one read each and
    only the three fields it needs (parsing all ~55 lines into a dict cost half the read again)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or (pgid is not None and int(name) == pgid):
            continue
        try:
            with open(f"/proc/{name}/status", "rb", buffering=0) as f:
                text = f.read()
        except OSError:
            continue  # exited while we looked
        if not text:
            continue  # exited while we read
        p_uid, p_pgid, state = (_status_field(text, key) for key in (b"Uid", b"NSpgid", b"State"))
        if p_uid is None or p_pgid is None or state is None:  # never skipped: it could be the run's
            raise SandboxError(f"/proc/{name}/status lacks Uid, NSpgid or State (Linux 4.1 or later "
                               "is needed to find a run's processes)")
        if (pgid is not None and int(p_pgid) == pgid) or (uid is not None and int(p_uid) == uid):
            found[int(name)] = state[:1] in (b"Z", b"X")
    return found


def _status_field(text: bytes, key: bytes) -> bytes | None:
    """The first word of a /proc/PID/status field (`Uid:\t0\t0...` -> b"0"); None if absent."""
    start = text.find(b"\n" + key + b":", text.find(b"\n"))  # past the Name line, whatever it holds
    if start < 0:
        return None
    words = text[start + len(key) + 2:text.find(b"\n", start + 1)].split()
    return words[0] if words else None


def _kill_and_reap(procs: dict[int, bool], wait_flags: int) -> list[int]:
    """SIGKILL the live ones of `procs` ({pid: zombie}), reap those we adopted (waitpid with
    `wait_flags`; another's child raises at once); the pids that were alive."""
    live = [pid for pid, zombie in procs.items() if not zombie]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in procs:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, wait_flags)
    return live


def kill_run(pgid: int | None, uid: int | None) -> None:
    """SIGKILL everything a run left behind and reap what we adopted; the leader is left to wait4.
    `pgid`: the run's group, named by its unreaped leader (None: by its uid alone)."""
    if pgid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    for _ in range(50):  # repeat: a process may fork while we scan
        live = _kill_and_reap(_run_processes(pgid, uid), 0)  # blocking reap: ours only when
        if not live:                                             # adopted; others raise at once
            return


def _communicate(proc: subprocess.Popen, limits: Limits, deadline: float, kill, contained):
    """Collect capped stdout and stderr until the leader exited and both pipes closed, or a limit.

    Returns (stdout, stderr, reason), reason None, "timeout" or "output". When the leader exits,
    `kill()` ends what it left behind, so a background child holding the pipes open cannot stretch
    the run to its timeout; unless the run is `contained` (see supervise).
    """
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    reason = None

    def read(fd: int) -> bool:
        nonlocal reason
        chunk = os.read(fd, _CHUNK)
        room = limits.output_bytes - len(bufs[fd])
        bufs[fd] += chunk[:room]
        if len(chunk) > room and reason is None:
            reason = "output"
        return bool(chunk)

    pidfd = os.pidfd_open(proc.pid)  # readable once the leader exits
    try:
        with selectors.DefaultSelector() as sel:
            for fd in (*bufs, pidfd):
                sel.register(fd, selectors.EVENT_READ)
            while reason is None and sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:  # checked every pass: a trickle of output must not outlive it
                    reason = "timeout"
                    break
                for key, _ in sel.select(remaining):
                    if key.fd == pidfd:
                        sel.unregister(pidfd)
                        if contained is None:
                            kill()
                    elif not read(key.fd):
                        sel.unregister(key.fd)
    finally:
        os.close(pidfd)
    if reason is not None or contained is None:
        kill()  # nothing of the run may still write; then take what is left in the pipes
    for fd, buf in bufs.items():
        os.set_blocking(fd, False)
        with contextlib.suppress(BlockingIOError):
            while len(buf) < limits.output_bytes and read(fd):
                pass
    out, err = (decode_output(bytes(b)) for b in bufs.values())
    return out, err, reason


@dataclass
class Outcome:
    """What supervising one child saw, before a backend interprets its exit status."""

    returncode: int
    stdout: str
    stderr: str
    reason: str | None  # None, "timeout" or "output": our own kills
    cpu_ms: float
    wall_ms: float


def supervise(argv: list[str], request: ExecRequest, uid: int | None, cwd: str, env: dict,
              pass_fds=(), contained=None) -> Outcome:
    """Run `argv` as a new session, feed it stdin, enforce the wall deadline and output caps,
    kill whatever it left, and reap it; a spawn failure is a SandboxError.

    `contained`: for a run in a pid namespace of its own (bwrap), a function that, once the
    leader has exited by itself, waits until every process of the run is gone and returns the
    CPU ms of what it reaped there (added to the leader's); then the scan of /proc for leftovers
    (~3 ms with a hundred processes on the host) is skipped. After our own kill (timeout, output
    cap), or when it returns None, the scan runs."""
    limits = request.limits
    with tempfile.TemporaryFile() as stdin:  # a file, not a pipe: no writer to keep alive
        stdin.write(encode_text(request.stdin))
        stdin.seek(0)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=stdin, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True,
                                    pass_fds=pass_fds)
        except (OSError, subprocess.SubprocessError) as e:
            raise SandboxError(f"cannot start {argv[0]!r}: {e}") from e
    kill_once, reason = functools.cache(lambda: kill_run(proc.pid, uid)), None
    with proc:  # closes the pipes
        try:
            out, err, reason = _communicate(proc, limits, start + limits.timeout_s, kill_once,
                                            contained)
        except BaseException:
            kill_once()
            raise
        finally:
            reaped_ms = None if contained is None or reason is not None else contained()
            if reaped_ms is None:
                kill_once()  # kill the group before reaping its leader, whose pid names the group
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
    if reason == "timeout" and proc.returncode != -signal.SIGKILL:
        reason = None  # it exited by itself just as the deadline passed: not our kill
    cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000 + (reaped_ms or 0.0)
    return Outcome(proc.returncode, out, err, reason, cpu_ms, (time.monotonic() - start) * 1000)


def result(outcome: Outcome, code: int | None, limits: Limits, backend: str) -> ExecResult:
    """The ExecResult of a supervised run whose exit status a backend decoded as `code`."""
    reason = outcome.reason
    return ExecResult(
        exit_code=code, stdout=outcome.stdout, stderr=outcome.stderr,
        timed_out=reason == "timeout", truncated=reason == "output",
        kill_reason=reason or kill_reason(code, outcome.cpu_ms, limits),
        wall_ms=outcome.wall_ms, cpu_ms=outcome.cpu_ms, backend=backend)


class SubprocessBackend(SandboxBackend):
    """A backend whose runs are supervised children of this process; thread-safe, stateless.

    Subclasses say how one leased run executes (`_run_leased`); this class finds the tools, the
    uid pool and a Python interpreter that actually runs inside the sandbox.
    """

    def __init__(self, uid_pool: UidPool | None = None, candidates: tuple[str, ...] | None = None,
                 uid_slots: int = UID_SLOTS, lease_timeout_s: float = LEASE_TIMEOUT_S):
        self._tools = {tool: which(tool) for tool in ("prlimit", "setpriv")}
        become_subreaper()
        if uid_pool is None and os.geteuid() == 0:
            uid_pool = UidPool(int(uid_slots), timeout_s=float(lease_timeout_s))
        self._uids = uid_pool
        self._preflight()
        # The sandbox uid must be able to reach the interpreter: a pyenv under /root (mode 700) is
        # not. setpriv still exec's it (still holding root's caps, which drop at exec) and it then
        # half-works on the system's stdlib, so "it ran" proves nothing: ask the sandboxed uid.
        probe = ExecRequest({}, ("python", "-c", "import os, sys; print(os.access(sys.executable, 1))"))
        tried = []
        for python in candidates or dict.fromkeys([sys.executable, "/usr/bin/python3"]):
            self._python = python
            try:
                found = self.run(probe)
                if found.stdout == "True\n":
                    return
                tried.append(f"{python}: {found.stdout.strip()} {found.stderr.strip()[-200:]}")
            except SandboxError as e:
                tried.append(f"{python}: {e}")
        raise SandboxError("no Python interpreter runs in the sandbox; tried " + "; ".join(tried))

    def run(self, request: ExecRequest) -> ExecResult:
        command = resolve_command(request.command, self._python, find=_program_path)
        with self._uids.lease() if self._uids else contextlib.nullcontext() as uid:
            return self._run_leased(command, uid, request)

    def _preflight(self) -> None:
        """Check, before anything runs, that this machine supports the backend; raise a clear
        SandboxError if not."""

    @abc.abstractmethod
    def _run_leased(self, command: list[str], uid: int | None, request: ExecRequest) -> ExecResult:
        """Run the resolved `command` for `request` as host uid `uid` (None: our own)."""


def _program_path(program: str) -> str:
    """Where the sandbox finds `program`: "./x" is the code's own file, in the work dir."""
    return program if program.startswith("./") else which(program)
