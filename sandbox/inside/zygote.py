"""The warm server's zygote: the one process attempts are cloned from, which never holds their data.

Standard library only (shipped into the sandbox beside forkserver.py).

A standby cloned from the server itself would start with a copy of the server's memory, and that
memory held the previous request (its files: a harness's tests and expected values) and the
previous attempt's output, readable from the clone through /proc/self/mem whether or not Python
had freed it. So the server forks this zygote once, before it reads its first request: the zygote
holds the preloaded modules and nothing else. It takes one order from the server, over a
socketpair: clone a standby (the server passes the standby's ends of its pipes with SCM_RIGHTS,
so that request bytes, files and output never pass through here); it answers with the pid, and
when a standby exits it reaps it and tells the server unasked (exit status and CPU time from
wait4, which only a parent may ask). Orders are not waited for: the server orders the next
standby and goes on supervising the current attempt while the zygote clones.
"""

import collections
import ctypes
import os
import selectors
import signal
import socket
import struct

_REAPED = struct.Struct("iid")  # pid, wait status, CPU ms


class Zygote:
    """The server's handle on its zygote process."""

    def __init__(self, spawn, keep=(2,)):
        """Fork the zygote. In it, `spawn(fds)` clones one standby holding the given fds and
        returns its pid; every fd but its socket and `keep` is closed there first."""
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                self.sock.close()
                _serve(theirs, spawn, keep)
            finally:
                os._exit(0)
        theirs.close()
        self._pids, self._reaped = collections.deque(), {}

    def order_standby(self, fds) -> None:
        """Have a standby cloned holding `fds` (the caller closes its copies); its pid comes
        from `next_pid`, in order."""
        socket.send_fds(self.sock, [b"S"], list(fds))

    def next_pid(self) -> int:
        """The pid of the oldest ordered standby; OSError if the zygote could not clone it."""
        while not self._pids:
            self.pump(block=True)
        pid = self._pids.popleft()
        if isinstance(pid, str):
            raise OSError(f"zygote: {pid}")
        return pid

    def reaped(self, pid: int):
        """(wait status, CPU ms) once standby `pid` has ended and been reaped, else None."""
        return self._reaped.pop(pid, None)

    def wait_reaped(self, pid: int) -> tuple[int, float]:
        while pid not in self._reaped:
            self.pump(block=True)
        return self._reaped.pop(pid)

    def pump(self, block: bool = False) -> None:
        """Take in the zygote's messages: every one waiting, or (block) at least one."""
        while True:
            try:
                message = self.sock.recv(256, 0 if block else socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            if not message:
                raise OSError("zygote: gone")
            kind, body = message[:1], message[1:]
            if kind == b"P":
                self._pids.append(struct.unpack("i", body)[0])
            elif kind == b"R":
                pid, status, cpu_ms = _REAPED.unpack(body)
                self._reaped[pid] = (status, cpu_ms)
            else:  # a standby that could not be cloned: its place in the order holds why
                self._pids.append(body.decode(errors="replace") or "unknown failure")
            block = False


def _serve(sock, spawn, keep):
    """The zygote's loop: orders from the server, and standbys ending, until the server is gone."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the server
    libc.prctl(15, b"fw-zygote", 0, 0, 0)
    for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
        if fd != sock.fileno() and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                if key.fileobj is sock:
                    if not _order(sock, spawn, sel):
                        return
                    continue
                pid = key.data
                sel.unregister(key.fileobj)
                os.close(key.fileobj)
                _, status, usage = os.wait4(pid, 0)
                sock.send(b"R" + _REAPED.pack(pid, status, (usage.ru_utime + usage.ru_stime) * 1000))


def _order(sock, spawn, sel) -> bool:
    """Carry out one order; False once the server has closed its end."""
    try:
        message, fds, _, _ = socket.recv_fds(sock, 16, 8)
    except OSError:
        return False
    if not message:
        return False
    try:
        if message != b"S" or len(fds) != 4:
            raise ValueError(f"bad order {message[:20]!r} with {len(fds)} fds")
        pid = spawn(fds)
        sel.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
        reply = b"P" + struct.pack("i", pid)
    except Exception as e:
        reply = b"E" + f"{type(e).__name__}: {e}".encode()[:200]
    finally:
        for fd in fds:
            os.close(fd)
    sock.send(reply)
    return True
