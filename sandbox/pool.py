"""The warm pool: long-lived sandboxed interpreters that fork one isolated child per attempt.

A cold `local` run pays for bwrap and a Python start-up (and the imports) every time; a pool
server pays them once, preloads what tasks import, and then forks (inside/forkserver.py). Each
server is its own bwrap sandbox with its own leased host uid and runs one attempt at a time, so
the process limit of one attempt is not shared with another; attempts get fresh namespaces of
their own inside it (nothing one writes or leaves running is visible to the next).

Servers start on one long-lived thread: bwrap's --die-with-parent ties a sandbox to the *thread*
that spawned it, and Beam may run DoFn.setup on a thread that ends.

A server's teardown needs no scan of /proc: everything of it (the server, each attempt's nested
namespaces, whatever they forked) lives in the pid namespace whose init bwrap reports as its
`child-pid`. Killing the outer bwrap kills that init (--die-with-parent), and the kernel kills
and reaps every process of a pid namespace before its init can be reaped; so once the init,
held by a pidfd from the start, is reaped (by us: the subreaper) nothing of the server is left
under its uid. Only when that cannot be shown (no child-pid, not ours to reap) is /proc scanned.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import select
import signal
import struct
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from flywheel.sandbox.contract import (
    PYTHON, ExecRequest, ExecResult, Limits, SandboxError, cpu_seconds, resolve_command)
from flywheel.sandbox import usage
from flywheel.sandbox.bwrap import bwrap_argv, interpreter_binds, memfd
from flywheel.sandbox.supervise import (
    SANDBOX_PATH, ZOMBIE_GRACE_S, Outcome, kill_run, result, which)

_HERE = Path(__file__).parent
SERVER_FILES = [  # what runs inside the server's sandbox, side by side in /flywheel
    *(_HERE / "inside" / name
      for name in ("forkserver.py", "forkserver_child.py", "zygote.py")),
    _HERE / "seccomp.py"]
# Imported once per server so that attempts find them loaded: what test-running tasks use.
PRELOAD = ("json", "re", "math", "collections", "itertools", "functools", "random", "string",
           "typing", "dataclasses", "unittest", "doctest", "heapq", "bisect", "fractions",
           "decimal", "statistics", "copy", "io", "traceback", "argparse", "operator", "textwrap",
           "shutil")  # shutil: the session file ops imported it, and test runs pay ~1.5 ms without it
_MAX_REPLY = 64 << 20
# Sandbox concurrency: the warm servers a pool may hold (and so the uids it leases) and the
# threads a pipeline stage runs actions on (transforms/execute.py), per worker process. 8 (the
# warm pool's size before pools were shared) keeps a small worker's cores busy while calls wait
# on their processes, and 2 workers x 8 is far from the machine's 256 uid slots; the sandbox
# option `pool_size=N` sets it for a run.
CONCURRENCY = 8
log = logging.getLogger(__name__)


class ForkServer:
    """One bwrap'd fork server, its uid lease and its protocol pipes."""

    def __init__(self, bwrap, python, tools, uids, preload):
        # `close` may come from another thread while a call waits on the pipes: they are closed
        # only once no call uses them (`_busy`), so a waiting call reads the dead server's EOF
        # (a SandboxError), never a closed descriptor, nor one the process has since reused.
        self._io, self._busy, self._pipes_closed = threading.Lock(), 0, False
        self._lease, self._init, self._closed = contextlib.ExitStack(), None, False
        self.uid = self._lease.enter_context(uids.lease()) if uids else None
        sources = [memfd(path.read_bytes()) for path in SERVER_FILES]
        setup = ["--dir", "/flywheel"]
        for fd, path in zip(sources, SERVER_FILES):
            setup += ["--perms", "0444", "--file", str(fd), f"/flywheel/{path.name}"]
        # Nested user namespaces allowed: each attempt makes one and forbids any below it.
        status = memfd()  # bwrap's JSON status: the host pid of the namespace's init
        argv = bwrap_argv(bwrap, Limits(disk_mb=1), binds=interpreter_binds(python), chdir="/",
                          setup=setup, nested_userns=True, status_fd=status)
        drop = [tools["prlimit"], "--core=0", "--nproc=1024", "--", tools["setpriv"], "--no-new-privs"]
        if self.uid is not None:
            drop += [f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups"]
        self.log = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                [*drop, "--", *argv, python, "-I", "/flywheel/forkserver.py",
                 json.dumps({"preload": preload})],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd="/",
                env={"PATH": SANDBOX_PATH}, start_new_session=True, pass_fds=[*sources, status])
        except OSError as e:
            os.close(status)
            self.close()
            raise SandboxError(f"cannot start the warm pool's server: {e}") from e
        finally:
            for fd in sources:
                os.close(fd)
        try:
            self.preloaded = self._read(time.monotonic() + 30)["ready"]
            self._init = _init_pidfd(status)  # held from now: its pid cannot name another
        except BaseException:
            self.close()
            raise
        finally:
            os.close(status)
        usage.tally("servers_started")

    def request(self, request: ExecRequest) -> dict:
        """Run `request` in a fresh child."""
        limits = request.limits
        argv = resolve_command(request.command, None, find=which)  # the server runs "python" warm
        return self.call({"op": "run", "argv": argv, "files": dict(request.files),
                          "stdin": request.stdin,
                          "limits": {**limits.__dict__, "cpu_s": cpu_seconds(limits)}},
                         limits.timeout_s + 10)  # the server enforces the timeout itself

    def call(self, message: dict, timeout_s: float = 10) -> dict:
        body = json.dumps(message).encode()
        with self._io:
            if self._closed:
                raise SandboxError("the warm pool server is closed")
            self._busy += 1
        try:
            try:
                self.proc.stdin.write(struct.pack(">I", len(body)) + body)
                self.proc.stdin.flush()
            except OSError as e:
                raise SandboxError(f"warm pool server gone: {e}; {self.stderr()}") from e
            return self._read(time.monotonic() + timeout_s)
        finally:
            with self._io:
                self._busy -= 1
            self._close_pipes_when_idle()

    def _read(self, deadline: float) -> dict:
        """One reply frame, or SandboxError if the server died or overran `deadline`."""
        fd = self.proc.stdout.fileno()
        data = b""
        while True:
            need = 4 if len(data) < 4 else 4 + struct.unpack(">I", data[:4])[0]
            if need > _MAX_REPLY:
                raise SandboxError("warm pool server sent an oversized reply")
            if len(data) >= need and len(data) > 4:
                return json.loads(data[4:need])
            ready = _wait_readable(fd, deadline - time.monotonic())
            chunk = os.read(fd, need - len(data)) if ready else b""
            if not chunk:
                raise SandboxError(f"warm pool server {'died' if ready else 'hung'}; {self.stderr()}")
            data += chunk

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()[-500:].decode(errors="replace")

    def close(self) -> None:
        """End the server and everything in its sandbox, then free its uid (idempotent)."""
        if not hasattr(self, "_io"):
            return
        with self._io:
            if self._closed:
                return
            self._closed = True
        proc = getattr(self, "proc", None)
        if proc is not None:
            # Unreaped, its pid and the group it names are ours; once reaped (poll() of a server
            # that died while idle) the number may name another run's group: never signalled.
            alive = proc.poll() is None
            if alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the outer bwrap: its init dies with it
            if not namespace_reaped(self._init):  # not shown empty: the scan, before the reap
                kill_run(proc.pid if alive else None, self.uid)
            proc.wait()
            self._close_pipes_when_idle()  # or the last call in flight does, when it returns
        if self._init is not None:
            os.close(self._init)
        self._lease.close()

    def _close_pipes_when_idle(self) -> None:
        """Close the protocol pipes once the server is closed and no call is using them."""
        with self._io:
            if (not self._closed or self._busy or self._pipes_closed
                    or getattr(self, "proc", None) is None):
                return
            self._pipes_closed = True
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):  # a write that failed left bytes to flush: the
                pipe.close()                    # descriptor closes anyway, the error is no news


def _init_pidfd(status_fd: int) -> int | None:
    """A pidfd of the pid-namespace init bwrap reported in its JSON status, or None."""
    os.lseek(status_fd, 0, os.SEEK_SET)
    for line in os.read(status_fd, 65536).decode(errors="replace").splitlines():
        pid = json.loads(line).get("child-pid") if line.strip().startswith("{") else None
        if isinstance(pid, int):
            try:
                return os.pidfd_open(pid)
            except OSError:
                return None  # already gone and reaped: nothing to hold
    return None


def namespace_reaped(init: int | None, wait_s: float = 5.0) -> bool:
    """Whether the pid namespace whose init `init` (a pidfd) names is gone for good: the init
    exited (its pidfd readable: the kernel has then killed and reaped every other process of
    the namespace, nested namespaces included) and was reaped, here or by its parent. False when
    that cannot be shown within `wait_s` (the caller then scans /proc)."""
    if init is None or not select.select([init], [], [], wait_s)[0]:
        return False
    deadline = time.monotonic() + ZOMBIE_GRACE_S
    while True:
        try:
            if os.waitid(os.P_PIDFD, init, os.WEXITED | os.WNOHANG) is not None:
                return True  # ours (adopted as subreaper), reaped now
        except ChildProcessError:  # not (yet) ours: gone once its parent reaped it
            try:
                signal.pidfd_send_signal(init, 0)
            except ProcessLookupError:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def to_result(reply: dict, request: ExecRequest, start: float) -> ExecResult:
    """The ExecResult of a server's reply to a run; a setup failure is a SandboxError."""
    if "error" in reply or reply.get("exit_code") is None and reply.get("reason") is None:
        raise SandboxError(f"warm pool attempt setup failed: {reply.get('error', reply)}")
    outcome = Outcome(reply["exit_code"] if reply["exit_code"] is not None else -9,
                      reply["stdout"], reply["stderr"], reply["reason"], reply["cpu_ms"],
                      (time.monotonic() - start) * 1000)
    return result(outcome, outcome.returncode, request.limits, "local")


def _wait_readable(fd: int, timeout: float) -> bool:
    import select
    return bool(select.select([fd], [], [], max(timeout, 0))[0])


class WarmPool:
    """Up to `size` servers; `run` borrows an idle one, starting one when none is idle. `close`
    ends every server, idle or busy (a busy one's run then fails as a SandboxError)."""

    def __init__(self, bwrap, python, tools, uids, preload=None, size: int = CONCURRENCY):
        self._start_args = (bwrap, python, tools, uids, list(PRELOAD if preload is None else preload))
        self._python, self._size, self._count = python, size, 0
        self._idle: queue.SimpleQueue[ForkServer] = queue.SimpleQueue()
        self._servers: set[ForkServer] = set()  # every live server, idle or busy
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="flywheel-sandbox-pool")
        self._closed = False

    @classmethod
    def try_start(cls, *args, **kwargs) -> "WarmPool | None":
        """A pool whose first server answered a probe, or None (with the reason logged)."""
        pool = cls(*args, **kwargs)
        try:
            probe = pool.run(ExecRequest({}, ("python", "-c", "print(1)")))
            if probe.exit_code == 0 and probe.stdout == "1\n":
                return pool
            reason = f"probe gave {probe}"
        except SandboxError as e:
            reason = str(e)
        pool.close()
        log.warning("sandbox warm pool unavailable, running cold: %s", reason)
        return None

    @staticmethod
    def accepts(command) -> bool:
        """Only plain `python FILE|-c CODE|-m MODULE ...` runs in the warm interpreter."""
        return (len(command) >= 2 and command[0] == PYTHON
                and (command[1] in ("-c", "-m") and len(command) >= 3 or not command[1].startswith("-")))

    @property
    def servers(self) -> list[ForkServer]:
        with self._lock:
            return list(self._servers)

    def run(self, request: ExecRequest) -> ExecResult:
        server = self._borrow()
        start = time.monotonic()
        try:
            reply = server.request(request)
        except BaseException:
            self._discard(server)
            usage.tally("servers_replaced")  # the next borrow starts another in its place
            raise
        self._idle.put(server)
        if self._closed:  # closed while it ran: close() may have missed it
            self._discard(server)
        return to_result(reply, request, start)

    def _borrow(self) -> ForkServer:
        while True:  # an idle server, or room to start one (a discarded server makes room)
            try:
                server = self._idle.get(timeout=0 if self._count < self._size else 0.05)
                if server.proc.poll() is None and not server._closed:
                    return server
                self._discard(server)  # died while idle (e.g. its spawning thread ended): replace
                usage.tally("servers_replaced")
            except queue.Empty:
                pass
            if self._closed:
                raise SandboxError("the warm pool is closed")
            with self._lock:
                grow = self._count < self._size
                self._count += grow
            if grow:
                break
        try:
            server = self._spawner.submit(ForkServer, *self._start_args).result()
        except BaseException:
            with self._lock:
                self._count -= 1
            raise
        with self._lock:
            self._servers.add(server)
        return server

    def _discard(self, server: ForkServer) -> None:
        with self._lock:
            if server not in self._servers:
                return  # already discarded (close and a failing run both may)
            self._servers.discard(server)
            self._count -= 1
        server.close()

    def close(self) -> None:
        self._closed = True
        for server in self.servers:
            self._discard(server)
        self._spawner.shutdown(wait=False)
