"""The warm server's zygote: the one process attempts are cloned from, which never holds their data.

Standard library only (shipped into the sandbox beside forkserver.py).

A standby cloned from the server itself would start with a copy of the server's memory, and that
memory held the previous request (its files: a harness's tests and expected values) and the
previous attempt's output, readable from the clone through /proc/self/mem whether or not Python
had freed it. So the server forks this zygote once, before it reads its first request: the zygote
holds the preloaded modules and nothing else, and acts only on two orders of the server, sent
over a socketpair: clone a standby (the server passes the standby's ends of its pipes with
SCM_RIGHTS, so that request bytes, files and output never pass through here) and reap one
(wait4: exit status and CPU time as the kernel measured them, which only a parent may ask).
"""

import ctypes
import os
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

    def standby(self, fds) -> int:
        """The pid of a new standby holding `fds` (closed here once it has them)."""
        socket.send_fds(self.sock, [b"S"], list(fds))
        return self._answer()

    def reap(self, pid: int) -> tuple[int, float]:
        """(wait status, CPU ms) of standby `pid`, waiting for it to end."""
        self.sock.send(b"R" + struct.pack("i", pid))
        answer = self.sock.recv(256)
        if not answer.startswith(b"R"):
            raise OSError(f"zygote: {answer[1:].decode(errors='replace')}")
        _, status, cpu_ms = _REAPED.unpack(answer[1:])
        return status, cpu_ms

    def _answer(self) -> int:
        answer = self.sock.recv(256)
        if not answer.startswith(b"P"):
            raise OSError(f"zygote: {answer[1:].decode(errors='replace') or 'gone'}")
        return struct.unpack("i", answer[1:])[0]


def _serve(sock, spawn, keep):
    """The zygote's loop: one order at a time, until the server closes its end."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: gone with the server
    libc.prctl(15, b"fw-zygote", 0, 0, 0)
    for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
        if fd != sock.fileno() and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 16, 8)
        except OSError:
            return
        if not message:
            return
        try:
            if message == b"S":
                pid = spawn(fds)
                reply = b"P" + struct.pack("i", pid)
            elif message[:1] == b"R":
                pid = struct.unpack("i", message[1:5])[0]
                _, status, usage = os.wait4(pid, 0)
                reply = b"R" + _REAPED.pack(pid, status, (usage.ru_utime + usage.ru_stime) * 1000)
            else:
                reply = b"E" + b"unknown order " + message[:20]
        except Exception as e:
            reply = b"E" + f"{type(e).__name__}: {e}".encode()[:200]
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(reply)
