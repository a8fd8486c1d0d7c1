"""The `local` sandbox backend (the default): bubblewrap namespaces, warm when it can be.

Each cold run is one `bwrap` (see ../bwrap.py) behind prlimit and setpriv; as root, the run's
host uid is leased from a UidPool, because RLIMIT_NPROC counts the *host* uid (root is exempt), so
a fork bomb is contained only when each concurrent sandbox has a uid of its own. The request's
files are written into the fresh tmpfs by bwrap itself from memfds: nothing touches the host disk.

Python runs (`python FILE`, `-c`, `-m`) go to a warm pool of long-lived sandboxed interpreters
(../pool.py, at most `pool_size` of them) when `warm=True` and the pool starts on this machine; everything else runs cold,
as does every request with `mounts` (each bound read-only where the request says).
A request's `image` is ignored: runs see the host's interpreter, and a task's environment folder
(a mount) is what supplies its packages here.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath

from flywheel.sandbox.bwrap import (
    NO_NAMESPACES, WORKDIR, bwrap_argv, find_bwrap, interpreter_binds, memfd)
from flywheel.sandbox.contract import (
    ExecRequest, ExecResult, SandboxError, encode_text, register_backend)
from flywheel.sandbox.exit_status import exit_code
from flywheel.sandbox.seccomp import seccomp_filter
from flywheel.sandbox.pool import CONCURRENCY
from flywheel.sandbox.supervise import (
    LEASE_TIMEOUT_S, SANDBOX_PATH, UID_SLOTS, SubprocessBackend, limited, result, supervise)

_EXTRA_PROCS = 1  # bwrap outside the namespaces (the command is pid 1 inside: see bwrap_argv)
SECCOMP = seccomp_filter()


def file_setup(files) -> tuple[list[str], list[int]]:
    """bwrap actions writing `files` into the work dir from memfds, and the fds to pass."""
    args, fds, dirs = [], [], set()
    for name, text in files.items():
        path = PurePosixPath(WORKDIR, *PurePosixPath(name).parts)
        for parent in reversed(path.parents):
            if len(parent.parts) > 2 and parent not in dirs:  # below /sandbox
                dirs.add(parent)
                args += ["--dir", str(parent)]
        fds.append(memfd(encode_text(text)))
        args += ["--perms", "0644", "--file", str(fds[-1]), str(path)]
    return args, fds


UNREACHABLE = ("the sandbox's uid cannot reach it (a parent is not searchable by others, e.g. "
               "/root); keep environments elsewhere (FLYWHEEL_ENVIRONMENTS) or chmod o+x the parents")


def reachable_by_sandbox(host: str) -> bool:
    """Whether the local sandbox can bind `host`: as root the run is a leased uid, which must
    reach the folder by name (every parent searchable by others); as anyone else it is that user."""
    return os.geteuid() != 0 or all(os.stat(p).st_mode & stat.S_IXOTH
                                    for p in [Path(host).resolve(), *Path(host).resolve().parents])


def mount_binds(mounts) -> list[str]:
    """bwrap actions binding each (host dir, sandbox path) read-only. As root the run is a leased
    uid, which must be able to reach the dir by name: every parent searchable by others."""
    args = []
    for host, dest in mounts:
        if not os.path.isdir(host):
            raise SandboxError(f"cannot mount {host}: not a directory")
        if not reachable_by_sandbox(host):
            raise SandboxError(f"cannot mount {host}: {UNREACHABLE}")
        args += ["--ro-bind", host, dest]
    return args


def status_field(status: bytes, key: str):
    """The value of `key` in bwrap's JSON status (one object per line), or None."""
    for line in status.decode(errors="replace").splitlines():
        record = json.loads(line) if line.strip().startswith("{") else {}
        if key in record:
            return record[key]
    return None


def read_status(status_fd: int) -> bytes:
    os.lseek(status_fd, 0, os.SEEK_SET)
    return os.read(status_fd, 65536)


def reap_init(status: bytes) -> float | None:
    """Wait until the sandbox's init (bwrap's pid 1, our orphan once the outer bwrap has exited)
    is gone, and with it every process of the run: bwrap reports the exit code before its pid
    namespace is empty, and the run's uid must not be leased again before. Reaping it also keeps
    its zombie from counting against that uid's process limit. Returns the CPU ms the kernel
    measured for the init and what it reaped (the command: the outer bwrap's own rusage never
    holds it), or None where it is not ours to reap (no subreaper here), so that the caller looks
    for what is left the slow way."""
    if status_field(status, "exit-code") is not None:
        # The outer bwrap reaped it (it writes the exit code only then; --as-pid-1: the command
        # is the namespace's init). The kernel kills and reaps everything in a pid namespace
        # before its init can be reaped, so nothing of the run is left; its CPU is in the outer
        # bwrap's rusage. No wait4 of its pid then: that number may already name another run's
        # process, a child of ours whose status we would steal.
        return 0.0
    pid = status_field(status, "child-pid")
    try:
        if pid is not None:  # unreaped (the outer bwrap died first): ours as subreaper
            _, _, usage = os.wait4(pid, 0)
            return (usage.ru_utime + usage.ru_stime) * 1000
    except ChildProcessError:
        pass
    return None


@register_backend("local")
class LocalBackend(SubprocessBackend):
    """bubblewrap-isolated runs; thread-safe. `warm=False` forces a cold bwrap per run."""

    def __init__(self, uid_pool=None, candidates=None, warm: bool = True,
                 preload: tuple[str, ...] | None = None, pool_size: int = CONCURRENCY,
                 uid_slots: int = UID_SLOTS, lease_timeout_s: float = LEASE_TIMEOUT_S):
        self._bwrap = find_bwrap()
        self._pool, self._python = None, None
        super().__init__(uid_pool, candidates, uid_slots, lease_timeout_s)
        if warm:
            from flywheel.sandbox.pool import WarmPool
            self._pool = WarmPool.try_start(self._bwrap, self._python, self._tools, self._uids,
                                            preload=preload, size=int(pool_size))

    @classmethod
    def one_shot_options(cls) -> dict:
        return {"warm": False}  # one run: a warm pool would cost more than it saves

    @property
    def warm(self) -> bool:
        return self._pool is not None

    def _preflight(self) -> None:
        try:
            probe = SubprocessBackend.run(self, ExecRequest({}, ("true",)))
        except SandboxError as e:
            raise SandboxError(NO_NAMESPACES.format(detail=e)) from e
        if probe.exit_code != 0:
            raise SandboxError(NO_NAMESPACES.format(detail=probe.stderr.strip()[-300:]))

    def run(self, request: ExecRequest) -> ExecResult:
        if self._pool is not None and not request.mounts and self._pool.accepts(request.command):
            return self._pool.run(request)
        return super().run(request)

    def _run_leased(self, command, uid, request):
        outcome, code = self._bwrap_run(command, uid, request)
        return result(outcome, code, request.limits, self.name)

    def _bwrap_run(self, command, uid, request):
        setup, fds = file_setup(request.files)
        mounts = mount_binds(request.mounts)
        status_fd, seccomp_fd = memfd(), memfd(SECCOMP) if SECCOMP else None
        fds += [fd for fd in (status_fd, seccomp_fd) if fd is not None]
        try:
            # The interpreter's prefix only for Python: as root it may be out of the uid's reach.
            binds = interpreter_binds(command[0]) if command[0] == self._python else []
            binds += mounts
            argv = bwrap_argv(self._bwrap, request.limits, binds=binds, setup=setup,
                              status_fd=status_fd, seccomp_fd=seccomp_fd, as_pid_1=True) + command
            outcome = supervise(limited(argv, request.limits, uid, self._tools, _EXTRA_PROCS, pid_1=True),
                                request, uid, "/", {"PATH": SANDBOX_PATH}, pass_fds=fds,
                                contained=lambda: reap_init(read_status(status_fd)))
            code = exit_code(status_field(read_status(status_fd), "exit-code"))  # None: never ran
        finally:
            for fd in fds:
                os.close(fd)
        if code is None and outcome.reason is None:  # bwrap itself failed: never the code's fault
            raise SandboxError(f"bwrap failed (exit {outcome.returncode}): "
                               f"{outcome.stderr.strip()[-500:]}")
        return outcome, code if code is not None else outcome.returncode

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
