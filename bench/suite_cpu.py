"""Where a test run's CPU goes: every process that ran, by kind, from the kernel's own accounting.

    sudo python bench/suite_cpu.py [--top 15] -- python -m pytest -m "not slow"

Turns on BSD process accounting (acct(2), root only) into a temporary file, runs the command,
turns it off, and prints the CPU seconds (user + system) of every process on the machine that
ended during the run (anything else running is counted too), grouped: the command's children
(pytest's workers), the other host processes (mostly Python: `flywheel` commands, Beam SDK
workers, trainer ranks, vLLM engines), runs in the local sandbox (uids 61000-62999), containers
and their daemons (docker, containerd, runc, runsc and uid 65534, the containers' user), and the
rest. A profile of one process (py-spy) misses most of this: sandboxed and container processes
are not its threads.

The kernel writes a record when a process ends, so a process still running when accounting
stops is missing (daemons the command leaves behind). Counts are the kernel's clock ticks
(1/100 s); `comm` is the name of the process's last thread, cut at 15 characters.
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import time

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
# etime (float), utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t), comm[16]
RECORD = struct.Struct("<ccHIIIIIIf8H16s")
TICKS = 100  # AHZ
SANDBOX_UIDS = range(61000, 63000)  # sandbox/supervise.py UidPool: base 61000, and tests' 62900+
CONTAINER_USER = 65534
CONTAINER_TOOLS = {"dockerd", "containerd", "containerd-shim", "runc", "runsc", "exe", "runsc-gofer",
                   "runsc-sandbox", "docker-proxy", "docker-init"}


def comp_t(value: int) -> int:
    """A comp_t: 13-bit mantissa, 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def records(path: str) -> list[dict]:
    data = open(path, "rb").read()
    out = []
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        f = RECORD.unpack_from(data, offset)
        if f[1] != b"\x03":
            continue
        out.append({"uid": f[4], "pid": f[6], "ppid": f[7], "wall": f[9] / TICKS,
                    "cpu": (comp_t(f[10]) + comp_t(f[11])) / TICKS,
                    "comm": f[18].split(b"\0")[0].decode(errors="replace")})
    return out


def kind(record: dict, command_pid: int) -> str:
    if record["ppid"] == command_pid:
        return "children of the command (pytest's workers)"
    if record["pid"] == command_pid:
        return "the command itself"
    if record["uid"] in SANDBOX_UIDS:
        return "local sandbox runs"
    if record["uid"] == CONTAINER_USER or record["comm"] in CONTAINER_TOOLS:
        return "containers and their daemons"
    if record["uid"] == 0:
        return "other host processes"
    return "other users"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=15, help="the costliest process names to list")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("give the command to run after --")
    libc = ctypes.CDLL(None, use_errno=True)
    fd, path = tempfile.mkstemp(prefix="suite-cpu-", suffix=".acct")
    os.close(fd)
    if libc.acct(path.encode()) != 0:
        sys.exit(f"acct({path}) failed: {os.strerror(ctypes.get_errno())} (it needs root)")
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command)
        code = proc.wait()
    finally:
        libc.acct(None)
    wall = time.monotonic() - start
    rows = records(path)
    os.unlink(path)
    total = sum(r["cpu"] for r in rows)
    cores = os.cpu_count() or 1
    print(f"{' '.join(command)}: exit {code}, {wall:.0f} s wall on {cores} cores, {len(rows)} "
          f"processes, {total:.0f} CPU-s ({100 * total / (wall * cores):.0f}% of the cores)")
    by_kind, count = collections.Counter(), collections.Counter()
    for r in rows:
        by_kind[kind(r, proc.pid)] += r["cpu"]
        count[kind(r, proc.pid)] += 1
    for name, cpu in by_kind.most_common():
        print(f"  {cpu:8.1f} CPU-s {100 * cpu / max(total, 1e-9):5.1f}%  {count[name]:6d} processes  {name}")
    by_name, named = collections.Counter(), collections.Counter()
    for r in rows:
        key = f"{r['comm']} ({kind(r, proc.pid)})"
        by_name[key] += r["cpu"]
        named[key] += 1
    print(f"the {args.top} costliest process names:")
    for name, cpu in by_name.most_common(args.top):
        print(f"  {cpu:8.1f} CPU-s  {named[name]:6d} x  {name}")
    return code


if __name__ == "__main__":
    sys.exit(main())
