"""The warm pool's server: runs INSIDE a bwrap sandbox, one isolated child per attempt.

Standard library only: it runs on the sandbox's interpreter, where flywheel is not installed.
    python3 -I /flywheel/sandbox_forkserver.py '{"preload": ["json", ...]}'
Frames on fds 0 (requests) and 1 (replies): 4-byte big-endian length, then JSON.

Each attempt is made ready *before* its request arrives, while the previous one runs (a
"standby"): B is cloned straight into new user, mount, pid, ipc, net and uts namespaces (pid 1
there), forbids further user namespaces, mounts a fresh size-capped tmpfs on /sandbox and a fresh
/proc, brings up `lo`, and forks C, which waits. On the request, B writes the files, drops every
capability and hands the request to C, which drops its own, sets the rlimits and a seccomp filter
and runs the code in the already-warm interpreter (or execs the command). When C exits, B reports
its status and exits, and the kernel kills whatever C left running: the namespaces vanish with
it, so nothing reaches the next attempt.
"""

import ctypes
import fcntl
import gc
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I left our own dir out
from sandbox_forkserver_child import be_c, check, drop_capabilities  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)
libc_gil = ctypes.PyDLL(None, use_errno=True)  # clone must not release the GIL (as os.fork)
NEW_NAMESPACES = 0x10000000 | 0x20000 | 0x20000000 | 0x08000000 | 0x40000000 | 0x04000000
WORKDIR = "/sandbox"
DEFAULT_DISK_MB = 64


def read_frame(fd):
    head = os.read(fd, 4)
    if len(head) < 4:
        return None
    size, data = struct.unpack(">I", head)[0], b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def write_frame(fd, obj):
    data = json.dumps(obj).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def close_all_but(keep):
    for fd in [int(fd) for fd in os.listdir("/proc/self/fd")]:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def read_all(fd):
    data = b""
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    return data


def clone_namespaced():
    """fork(), but the child is pid 1 of new namespaces (user, mount, pid, ipc, net, uts)."""
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = libc_gil.syscall(56, NEW_NAMESPACES | signal.SIGCHLD, 0, 0, 0, 0)  # SYS_clone
    err = ctypes.get_errno()
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()  # as os.fork: threading, at-fork hooks (random)
    else:
        ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


class Standby:
    """One attempt made ready ahead of its request: B and C waiting in fresh namespaces."""

    def __init__(self):
        self.req_w, self.out_r, self.err_r, self.status_r = None, None, None, None
        (req_r, self.req_w), (self.out_r, out_w), (self.err_r, err_w), (self.status_r, status_w) = (
            os.pipe(), os.pipe(), os.pipe(), os.pipe())
        self.b = clone_namespaced()
        if self.b == 0:
            try:
                close_all_but({req_r, out_w, err_w, status_w})
                self.be_b(req_r, out_w, err_w, status_w)
            except BaseException as e:
                os.write(status_w, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
            os._exit(0)
        for fd in (req_r, out_w, err_w, status_w):
            os.close(fd)

    @staticmethod
    def be_b(req_r, out_w, err_w, status_w):
        """B, pid 1 of the attempt's namespaces; never returns."""
        uid, gid = os.getuid(), os.getgid()
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1"),
                           ("/proc/sys/user/max_user_namespaces", "0")):
            with open(path, "w") as f:
                f.write(text)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the attempt dies with the server
        libc.prctl(4, 0, 0, 0, 0)  # not dumpable (after the maps): no /proc/1/fd for the code
        os.setsid()  # kill(0, ...) reaches process groups across pid namespaces: leave the server's
        check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "make mounts private")
        mount_workdir(DEFAULT_DISK_MB)
        check(libc.mount(b"proc", b"/proc", b"proc", 0x2 | 0x4 | 0x8, None), "mount /proc")
        with socket.socket() as s:  # lo starts down in a new net namespace: SIOCSIFFLAGS UP|RUNNING
            fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))
        go_r, go_w = os.pipe()
        c = os.fork()
        if c == 0:
            os.close(go_w), os.close(req_r), os.close(status_w)
            be_c(read_all(go_r), out_w, err_w)
        os.close(go_r), os.close(out_w), os.close(err_w)
        raw = read_all(req_r)
        if not raw:  # the server shut down before using us
            os._exit(0)
        req = json.loads(raw)
        if req.get("keep_workdir"):  # a session: its turns share the server's own work dir
            check(libc.umount2(WORKDIR.encode(), 2), "unmount work dir")  # MNT_DETACH
        elif req["limits"]["disk_mb"] != DEFAULT_DISK_MB:
            mount_workdir(req["limits"]["disk_mb"], remount=True)
        drop_capabilities()
        for name, text in req["files"].items():
            path = os.path.join(WORKDIR, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        os.write(go_w, raw)
        os.close(go_w)
        while True:  # pid 1: reap every orphan until C is done
            pid, status, usage = os.wait4(-1, 0)
            if pid == c:
                cpu_ms = (usage.ru_utime + usage.ru_stime) * 1000
                os.write(status_w, json.dumps({"status": status, "cpu_ms": cpu_ms}).encode())
                os._exit(0)


def mount_workdir(disk_mb, remount=False):
    flags = 0x2 | 0x4 | 0x8 | (0x20 if remount else 0)  # nosuid nodev noexec (MS_REMOUNT)
    check(libc.mount(b"tmpfs", WORKDIR.encode(), b"tmpfs", flags,
                     f"size={disk_mb << 20},mode=0755".encode()), "mount work dir")


def serve_one(standby, req):
    """Hand `req` to a standby attempt and supervise it: capped output, timeout, status."""
    limits, cap = req["limits"], req["limits"]["output_bytes"]
    start = time.monotonic()
    os.write(standby.req_w, json.dumps(req).encode())
    os.close(standby.req_w)
    bufs, reason, status = {standby.out_r: bytearray(), standby.err_r: bytearray()}, None, {}
    pidfd = os.pidfd_open(standby.b)
    yield  # the caller makes the next standby while this attempt runs
    with selectors.DefaultSelector() as sel:
        for fd in (standby.out_r, standby.err_r, standby.status_r, pidfd):
            sel.register(fd, selectors.EVENT_READ)
        # Done when both pipes closed and B reported C's status (or B itself is gone).
        while reason is None and (standby.out_r in sel.get_map() or standby.err_r in sel.get_map()
                                  or (standby.status_r in sel.get_map() and pidfd in sel.get_map())):
            remaining = start + limits["timeout_s"] - time.monotonic()
            if remaining <= 0:
                reason = "timeout"
                break
            for key, _ in sel.select(remaining):
                if key.fd == pidfd:
                    sel.unregister(pidfd)
                    continue
                chunk = os.read(key.fd, 65536)
                if key.fd == standby.status_r:
                    status.update(parse_status(chunk))
                    sel.unregister(key.fd)
                    continue
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                room = cap - len(buf)
                buf += chunk[:room]
                if len(chunk) > room:
                    reason = "output"
    if reason is not None or "status" not in status:
        try:
            os.kill(standby.b, signal.SIGKILL)  # pid 1: its death takes the namespaces with it
        except ProcessLookupError:
            pass
        os.waitpid(standby.b, 0)
        os.set_blocking(standby.status_r, False)
        try:
            status.update(parse_status(os.read(standby.status_r, 65536)))
        except BlockingIOError:
            pass
    for fd in (pidfd, standby.status_r, *bufs):
        os.close(fd)
    if "error" in status:
        yield {"error": status["error"]}
    yield {"stdout": bytes(bufs[standby.out_r]).decode("utf-8", "replace"),
           "stderr": bytes(bufs[standby.err_r]).decode("utf-8", "replace"), "reason": reason,
           "cpu_ms": status.get("cpu_ms", 0.0), "exit_code": (
               os.waitstatus_to_exitcode(status["status"]) if "status" in status else None)}


def parse_status(data):
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {"error": f"bad status {data[:100]!r}"}


def reap():
    """Collect finished attempts (B's teardown is not waited for on the critical path)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main():
    from sandbox_forkserver_files import session_op
    config = json.loads(sys.argv[1])
    sys.dont_write_bytecode = True  # a session's stale .pyc (same size, same second) would win
    loaded = []
    for name in config.get("preload", []):
        try:
            __import__(name)
            loaded.append(name)
        except Exception:
            pass
    os.chdir("/")  # no attempt may hold a way (via /proc/1/cwd) into anything it could share
    gc.freeze()  # children's collections then skip (and never write to) the preloaded objects
    standby = Standby()
    write_frame(1, {"ready": loaded})
    while (req := read_frame(0)) is not None:
        if req.get("op", "run") != "run":
            try:
                write_frame(1, session_op(req))
            except Exception as e:
                write_frame(1, {"error": f"{type(e).__name__}: {e}"})
            continue
        attempt = serve_one(standby, req)
        next(attempt)
        try:
            standby = Standby()
        except OSError as e:
            standby = None
            error = str(e)
        write_frame(1, attempt.send(None))
        reap()
        if standby is None:
            write_frame(2, {"fatal": error})
            return


if __name__ == "__main__":
    main()
