"""The `local` sandbox backend: a hardened subprocess in a fresh work dir.

Hardening: a new session whose processes all die with the run, rlimits, no_new_privs, a clean
environment, capped output, and (when the host user is root) an unprivileged uid per concurrent
run, because RLIMIT_NPROC counts the host uid and a root child could signal any process on the
machine. There is no pid, mount or network namespace yet: a later backend wraps this one in
bubblewrap. Until then code that could hurt the host (fork bombs, `kill(-1)`) must not run here.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import math
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
from pathlib import PurePosixPath

from flywheel.transforms.sandbox import (
    ExecRequest, ExecResult, Limits, SandboxBackend, SandboxError, register_backend)

_CHUNK = 65536
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")
_PROCESS_MARKERS = ("can't start new thread", "BlockingIOError: [Errno 11]")


class UidPool:
    """Leases each concurrent run its own unprivileged uid, `base + slot`.

    A slot is held by an exclusive flock on a file named after it. Every lease opens its own file
    description, so flock excludes other threads *and* other processes on the machine (Beam runs
    one SDK worker process per core), and the kernel releases a slot whose holder died. Uids that
    name a user of the host are skipped: the backend kills every process of a leased uid.
    """

    def __init__(self, size: int = 256, base: int = 61000, lock_dir: str | None = None):
        users = {entry.pw_uid for entry in pwd.getpwall()}
        self.uids = [uid for uid in range(base, base + size) if uid not in users]
        self.lock_dir = lock_dir or os.path.join(tempfile.gettempdir(), "flywheel-sandbox-uids")
        os.makedirs(self.lock_dir, mode=0o700, exist_ok=True)
        st = os.lstat(self.lock_dir)  # /tmp is shared: refuse a dir a sandboxed uid planted first
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise SandboxError(f"uid lock dir {self.lock_dir} is not a private dir of this user")

    @contextlib.contextmanager
    def lease(self):
        while True:
            for uid in self.uids:
                path = os.path.join(self.lock_dir, str(uid))
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                try:
                    yield uid
                finally:
                    os.close(fd)
                return
            time.sleep(0.01)  # every slot busy: wait for a run to finish


def _become_subreaper() -> None:
    """Adopt orphans of our sandboxes so we can reap them: zombies left to a PID 1 that does not
    reap (as in many containers) would count against a slot uid's RLIMIT_NPROC forever."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _write_files(workdir: str, files, uid: int | None) -> None:
    """Write `files` under `workdir` (ExecRequest checked that no path escapes it)."""
    for name, text in files.items():
        path = os.path.join(workdir, *PurePosixPath(name).parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    if uid is not None:  # the code may rewrite its own files, and create new ones
        for root, dirs, names in os.walk(workdir):
            for entry in [root] + [os.path.join(root, n) for n in dirs + names]:
                os.chown(entry, uid, uid)


def _which(program: str) -> str:
    """The absolute path of `program` on the sandbox's PATH; a missing one is our failure."""
    found = shutil.which(program, path="/usr/bin:/bin")
    if found is None:
        raise SandboxError(f"{program!r} not found on /usr/bin:/bin")
    return found


def _cpu_s(limits: Limits) -> int:
    """The CPU limit in whole seconds, the granularity of RLIMIT_CPU."""
    return math.ceil(limits.cpu_s if limits.cpu_s is not None else limits.timeout_s)


def _limited(command: list[str], limits: Limits, uid: int | None, tools: dict) -> list[str]:
    """`command` behind util-linux's prlimit (rlimits) and setpriv (no new privileges, and as
    root: drop to `uid` with no groups). Exec'd wrappers, not a Popen preexec_fn: a preexec_fn
    forces fork() instead of vfork(), and fork() runs the parent's atfork handlers in the child,
    where gRPC's (every Beam worker has it) abort the child now and then."""
    cpu, memory, fsize = _cpu_s(limits), limits.memory_mb << 20, limits.file_size_mb << 20
    argv = [tools["prlimit"], f"--as={memory}", f"--cpu={cpu}:{cpu + 1}",  # SIGXCPU, then SIGKILL
            f"--fsize={fsize}", f"--nofile={limits.open_files}", "--core=0",
            f"--nproc={limits.processes}", "--", tools["setpriv"], "--no-new-privs"]
    if uid is not None:
        argv += [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return argv + ["--"] + command


def _run_processes(pgid: int, uid: int | None) -> dict[int, bool]:
    """pid -> is_zombie for every process of one run: its process group, and its uid if it has one
    (a child that called setsid() left the group but cannot leave its uid)."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == pgid:
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue  # exited while we looked
        p_uid, p_pgid = int(fields["Uid"].split()[0]), int(fields["NSpgid"].split()[0])
        if p_pgid == pgid or (uid is not None and p_uid == uid):
            found[int(name)] = fields["State"].split()[0] in ("Z", "X")
    return found


def _kill_run(pgid: int, uid: int | None) -> None:
    """SIGKILL everything the run left behind and reap what we adopted; the leader is left to wait4."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(50):  # repeat: a process may fork while we scan
        procs = _run_processes(pgid, uid)
        live = [pid for pid, zombie in procs.items() if not zombie]
        for pid in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in procs:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)  # ours only when adopted as subreaper; others raise at once
        if not live:
            return


def _communicate(proc: subprocess.Popen, limits: Limits, deadline: float, kill):
    """Collect capped stdout and stderr until the leader exited and both pipes closed, or a limit.

    Returns (stdout, stderr, reason), reason None, "timeout" or "output". When the leader exits,
    `kill()` ends what it left behind, so a background child holding the pipes open cannot stretch
    the run to its timeout.
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
                        kill()
                    elif not read(key.fd):
                        sel.unregister(key.fd)
    finally:
        os.close(pidfd)
    kill()  # nothing of the run may still write; then take what is left in the pipes
    for fd, buf in bufs.items():
        os.set_blocking(fd, False)
        with contextlib.suppress(BlockingIOError):
            while len(buf) < limits.output_bytes and read(fd):
                pass
    out, err = (bytes(b).decode("utf-8", "replace") for b in bufs.values())
    return out, err, reason


@register_backend("local")
class LocalBackend(SandboxBackend):
    """Runs each request as a subprocess of this process; thread-safe, no state between runs."""

    def __init__(self, uid_pool: UidPool | None = None, candidates: tuple[str, ...] | None = None):
        self._tools = {tool: _which(tool) for tool in ("prlimit", "setpriv")}
        _become_subreaper()
        self._uids = uid_pool or (UidPool() if os.geteuid() == 0 else None)
        # The sandbox uid must be able to reach the interpreter: a pyenv under /root (mode 700) is
        # not. setpriv still exec's it (still holding root's caps, which drop at exec) and it then
        # half-works on the system's stdlib, so "it ran" proves nothing: ask the sandboxed uid.
        probe = ExecRequest({}, ("python", "-c", "import os, sys; print(os.access(sys.executable, 1))"))
        tried = []
        for python in candidates or dict.fromkeys([sys.executable, "/usr/bin/python3"]):
            self._python = python
            try:
                result = self.run(probe)
                if result.stdout == "True\n":
                    return
                tried.append(f"{python}: {result.stdout.strip()} {result.stderr.strip()[-200:]}")
            except SandboxError as e:
                tried.append(f"{python}: {e}")
        raise SandboxError("no Python interpreter runs in the sandbox; tried " + "; ".join(tried))

    def run(self, request: ExecRequest) -> ExecResult:
        command, program = list(request.command), request.command[0]
        if program == "python":
            command[:1] = [self._python, "-I"]
        elif not program.startswith("./"):  # "./x" is the code's own file, found in the work dir
            command[0] = _which(program)
        with (self._uids.lease() if self._uids else contextlib.nullcontext()) as uid, \
                tempfile.TemporaryDirectory(prefix="flywheel-sandbox-") as workdir:
            _write_files(workdir, request.files, uid)
            return self._execute(command, workdir, uid, request)

    def _execute(self, command: list[str], workdir: str, uid: int | None, request: ExecRequest):
        limits = request.limits
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir,
               "PYTHONDONTWRITEBYTECODE": "1"}  # never the parent's: it may hold credentials
        with tempfile.TemporaryFile() as stdin:  # a file, not a pipe: no writer to keep alive
            stdin.write(request.stdin.encode())
            stdin.seek(0)
            start = time.monotonic()
            try:
                proc = subprocess.Popen(
                    _limited(command, limits, uid, self._tools), cwd=workdir, env=env,
                    stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    start_new_session=True)
            except (OSError, subprocess.SubprocessError) as e:
                raise SandboxError(f"cannot start {command[0]!r}: {e}") from e
        kill_once = functools.cache(lambda: _kill_run(proc.pid, uid))
        with proc:  # closes the pipes
            try:
                out, err, reason = _communicate(proc, limits, start + limits.timeout_s, kill_once)
            finally:
                kill_once()  # kill the group before reaping its leader, whose pid names the group
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
        if reason == "timeout" and proc.returncode != -signal.SIGKILL:
            reason = None  # it exited by itself just as the deadline passed: not our kill
        cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000
        return ExecResult(
            exit_code=proc.returncode, stdout=out, stderr=err, timed_out=reason == "timeout",
            truncated=reason == "output",
            kill_reason=reason or _kill_reason(proc.returncode, err, cpu_ms, limits),
            wall_ms=(time.monotonic() - start) * 1000, cpu_ms=cpu_ms, backend=self.name)


def _kill_reason(code: int, stderr: str, cpu_ms: float, limits: Limits) -> str | None:
    """Why the code stopped, when it was not our timer or output cap."""
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and cpu_ms >= 1000 * _cpu_s(limits)):
        return "cpu"
    if code != 0 and any(marker in stderr for marker in _MEMORY_MARKERS):
        return "memory"
    if code != 0 and any(marker in stderr for marker in _PROCESS_MARKERS):
        return "processes"
    return "signal" if code < 0 else None
