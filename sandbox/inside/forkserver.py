"""The warm pool's server: runs INSIDE a bwrap sandbox, one isolated process per attempt.

Standard library only: it runs on the sandbox's interpreter, where flywheel is not installed.
    python3 -I /flywheel/forkserver.py '{"preload": ["json", ...]}'
Frames on fds 0 (requests) and 1 (replies): 4-byte big-endian length, then JSON.

Each attempt is made ready *before* its request arrives, while the previous one runs (a
"standby"): X is cloned straight into new user, mount, pid, ipc and uts namespaces, forbids
further user namespaces, mounts a fresh size-capped tmpfs on /sandbox and a fresh /proc, and
waits. On the request, X writes the files, drops every capability, sets the rlimits and a seccomp
filter and runs the code in the already-warm interpreter (or execs the command). When X exits,
the kernel kills whatever it left running before X can be reaped: nothing reaches the next one.

One fork per attempt: X is the code's own process, so the code runs as pid 1 of its namespace,
like a container's command without an init (`docker run` without `--init`). As for any init,
a signal the code sends *itself* is dropped unless it installed a handler for it (its own
`os.kill(os.getpid(), SIGTERM)` does nothing; a fault still kills it), its orphans are
re-parented to it, its CPU limit is enforced with SIGKILL (SIGXCPU would be dropped), and it
already leads its own session (so `os.setsid()` fails, as under `start_new_session=True`). A
second process per attempt (an init that forks the code) made every attempt ~1.6 ms slower.
Exit status and CPU time come from the kernel (wait4), never from anything the code could write.

Nothing of one attempt reaches the next. X is cloned by the zygote (zygote.py), a process forked
before the first request, whose memory never held a request or an attempt's output; this server,
which does hold them, never clones. Each attempt gets its own network namespace (with only `lo`,
brought up by X), so no socket state outlives it (a TIME_WAIT connection stays in its namespace
for a minute, readable in /proc/net/tcp), and its own ipc namespace (SysV objects outlive their
processes). Both are created while the previous attempt runs, off the request's path.
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
from forkserver_child import WORKDIR, be_code, check, decode_output, drop_capabilities  # noqa: E402
from zygote import Zygote  # noqa: E402

libc = ctypes.CDLL(None, use_errno=True)
libc_gil = ctypes.PyDLL(None, use_errno=True)  # clone must not release the GIL (as os.fork)
NEW_NAMESPACES = 0x10000000 | 0x20000 | 0x20000000 | 0x08000000 | 0x04000000 | 0x40000000
DEFAULT_DISK_MB = 64


def read_frame(fd):
    """(the frame's bytes, its JSON), or (None, None) at the end."""
    head = os.read(fd, 4)
    if len(head) < 4:
        return None, None
    size, data = struct.unpack(">I", head)[0], b""
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None, None
        data += chunk
    return data, json.loads(data)


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
    """One attempt made ready ahead of its request: X waiting as pid 1 of fresh namespaces,
    cloned by the zygote (never by this server, whose memory has held other attempts' data).
    Ordered at once; its pid (`ready`) is asked for when its request comes."""

    def __init__(self, zygote):
        (req_r, self.req_w), (self.out_r, out_w), (self.err_r, err_w), (self.setup_r, setup_w) = (
            os.pipe(), os.pipe(), os.pipe(), os.pipe())
        self.pid = None
        try:
            zygote.order_standby((req_r, out_w, err_w, setup_w))
        finally:
            for fd in (req_r, out_w, err_w, setup_w):
                os.close(fd)

    def ready(self, zygote) -> None:
        if self.pid is None:
            self.pid = zygote.next_pid()


def spawn_x(fds):
    """In the zygote: clone X holding `fds` (its ends of the pipes); X never returns."""
    pid = clone_namespaced()
    if pid == 0:
        req_r, out_w, err_w, setup_w = fds
        try:
            close_all_but(set(fds))
            be_x(req_r, out_w, err_w, setup_w)
        except BaseException as e:  # before the code ran: the sandbox's failure, not the code's
            os.write(setup_w, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
        os._exit(0)
    return pid


def be_x(req_r, out_w, err_w, setup_w):
    """X, pid 1 of the attempt's namespaces: ready the sandbox, wait, run the code; never returns."""
    uid, gid = os.getuid(), os.getgid()
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1"),
                       ("/proc/sys/user/max_user_namespaces", "0")):
        with open(path, "w") as f:
            f.write(text)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the attempt dies with the server
    libc.prctl(15, b"fw-attempt", 0, 0, 0)  # PR_SET_NAME: tell attempts from servers in ps
    os.setsid()  # kill(0, ...) reaches process groups across pid namespaces: leave the server's
    check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "make mounts private")
    mount_workdir(DEFAULT_DISK_MB)
    check(libc.mount(b"proc", b"/proc", b"proc", 0x2 | 0x4 | 0x8, None), "mount /proc")
    loopback_up()
    raw = read_all(req_r)
    if not raw:  # the server shut down before using us
        os._exit(0)
    os.close(req_r)
    req = json.loads(raw)
    if req["limits"]["disk_mb"] != DEFAULT_DISK_MB:
        mount_workdir(req["limits"]["disk_mb"], remount=True)
    for name, text in req["files"].items():
        path = os.path.join(WORKDIR, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)  # as contract.encode_text: lone surrogates never raise
    drop_capabilities()
    be_code(req, out_w, err_w, setup_w)


def loopback_up():
    """The attempt's own network namespace starts with `lo` down: bring it up, as bwrap does."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # SIOCSIFFLAGS: UP LOOPBACK RUNNING
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))


def mount_workdir(disk_mb, remount=False):
    flags = 0x2 | 0x4 | 0x8 | (0x20 if remount else 0)  # nosuid nodev noexec (MS_REMOUNT)
    check(libc.mount(b"tmpfs", WORKDIR.encode(), b"tmpfs", flags,
                     f"size={disk_mb << 20},mode=0755".encode()), "mount work dir")


def serve_one(zygote, standby, raw, req):
    """Hand the request (`raw`, parsed: `req`) to a standby attempt and supervise it: capped
    output, timeout, status."""
    limits, cap = req["limits"], req["limits"]["output_bytes"]
    start = time.monotonic()
    try:
        os.write(standby.req_w, raw)
    except BrokenPipeError:  # X failed before the request: its report is on the setup pipe
        pass
    os.close(standby.req_w)
    bufs, reason, setup = {standby.out_r: bytearray(), standby.err_r: bytearray()}, None, b""
    yield  # the caller orders the next standby while this attempt runs
    ended = zygote.reaped(standby.pid)
    with selectors.DefaultSelector() as sel:
        for fd in (standby.out_r, standby.err_r, standby.setup_r, zygote.sock):
            sel.register(fd, selectors.EVENT_READ)
        # Done when X is gone (reaped by the zygote, and with it every process of the attempt)
        # and both pipes are drained.
        while reason is None and (ended is None or {standby.out_r, standby.err_r} & sel.get_map().keys()):
            remaining = start + limits["timeout_s"] - time.monotonic()
            if remaining <= 0:
                reason = "timeout"
                break
            for key, _ in sel.select(remaining):
                if key.fileobj is zygote.sock:
                    zygote.pump()
                    ended = ended or zygote.reaped(standby.pid)
                    if ended is not None:
                        sel.unregister(zygote.sock)
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                if key.fd == standby.setup_r:
                    setup += chunk
                    continue
                buf = bufs[key.fd]
                room = cap - len(buf)
                buf += chunk[:room]
                if len(chunk) > room:
                    reason = "output"
    if reason is not None and ended is None:
        try:
            os.kill(standby.pid, signal.SIGKILL)  # pid 1: its death takes the namespaces with it
        except ProcessLookupError:
            pass
    status, cpu_ms = ended or zygote.wait_reaped(standby.pid)
    os.set_blocking(standby.setup_r, False)
    try:
        setup += os.read(standby.setup_r, 65536)
    except BlockingIOError:
        pass
    for fd in (standby.setup_r, *bufs):
        os.close(fd)
    if setup:
        yield {"error": parse_error(setup)}
    yield {"stdout": decode_output(bufs[standby.out_r]),
           "stderr": decode_output(bufs[standby.err_r]), "reason": reason,
           "cpu_ms": cpu_ms,
           "exit_code": os.waitstatus_to_exitcode(status)}


def parse_error(data):
    try:
        return json.loads(data)["error"]
    except (ValueError, KeyError, TypeError):
        return f"bad setup report {data[:100]!r}"


def main():
    config = json.loads(sys.argv[1])
    sys.dont_write_bytecode = True  # attempts leave no .pyc behind
    loaded = []
    for name in config.get("preload", []):
        try:
            __import__(name)
            loaded.append(name)
        except Exception:
            pass
    os.chdir("/")  # no attempt may hold a way (via /proc/1/cwd) into anything it could share
    gc.freeze()  # children's collections then skip (and never write to) the preloaded objects
    zygote = Zygote(spawn_x)  # before any request: its memory never holds one
    standby = Standby(zygote)
    standby.ready(zygote)  # the first clone works, or the server fails to start, saying why
    write_frame(1, {"ready": loaded})
    while True:
        raw, req = read_frame(0)
        if req is None:
            return
        if req.get("op", "run") != "run":
            write_frame(1, {"error": f"unknown op {req.get('op')!r}"})
            continue
        try:
            standby.ready(zygote)  # ordered during the previous attempt: long since cloned
        except OSError as e:
            write_frame(1, {"error": str(e)})
            write_frame(2, {"fatal": str(e)})
            return
        attempt = serve_one(zygote, standby, raw, req)
        next(attempt)
        standby = Standby(zygote)
        write_frame(1, attempt.send(None))


if __name__ == "__main__":
    main()
