"""The sandbox's syscall policy: one list of what no task needs and sandbox escapes love.

Standard library only: the warm pool ships this file into its server beside the programs of
sandbox/inside/, and every attempt loads the BPF program built here; cold `local` runs hand bwrap
the same program (`--seccomp FD`); the `docker` backend's JSON profile denies the same names.
"""

import json
import os
import struct

# Denied with EPERM: ptrace (e.g. of pid 1, whose exit status is the attempt's),
# process_vm_readv/writev, kernel keyrings (add_key, request_key, keyctl: per uid, so shared by a
# warm server's attempts), bpf, perf_event_open, userfaultfd, io_uring (setup, enter, register),
# module and kexec loading. Each with its number on x86_64 and on aarch64 (asm-generic's table).
DENIED = {  # name: (x86_64, aarch64)
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # in the order of DENIED's numbers

# Docker's default profile allows ptrace, and so attaching to pid 1, whose exit status is the
# run's: the docker backend replaces it with allow-by-default minus DENIED, plus what the default
# profile blocks (namespaces, mounts, modules...), which bwrap'd runs get from their namespaces,
# dropped capabilities and --disable-userns instead.
CONTAINER_DENIED = (
    "delete_module", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot",
    "open_by_handle_at", "name_to_handle_at", "syslog", "acct", "swapon", "swapoff", "reboot",
    "quotactl", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount")
_NAMESPACE_FLAGS = (0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


def architecture(machine: str) -> tuple[int, tuple[int, ...]]:
    """(audit architecture, numbers of the DENIED syscalls) on `machine` (`uname -m`)."""
    column = list(AUDIT_ARCH).index(machine)
    return AUDIT_ARCH[machine], tuple(numbers[column] for numbers in DENIED.values())


def seccomp_filter(machine=None) -> bytes:
    """A classic-BPF seccomp program: EPERM for the DENIED syscalls of this machine's
    architecture and for any other architecture (x86_64: int 0x80) or ABI (x86_64: x32), allow
    the rest. Empty on an architecture without a list (no filter: the namespaces still hold)."""
    machine = machine or os.uname().machine
    if machine not in AUDIT_ARCH:
        return b""
    arch, denied = architecture(machine)
    deny, allow = 0x00050000 | 1, 0x7FFF0000  # SECCOMP_RET_ERRNO | EPERM, SECCOMP_RET_ALLOW
    n, x32 = len(denied), machine == "x86_64"
    prog = [(0x20, 0, 0, 4), (0x15, 0, n + 2 + x32, arch), (0x20, 0, 0, 0)]  # ld arch; jne deny; ld nr
    if x32:
        prog += [(0x35, n + 1, 0, 0x40000000)]  # jge x32 bit -> deny
    prog += [(0x15, n - i, 0, nr) for i, nr in enumerate(denied)]  # jeq nr -> deny
    prog += [(0x06, 0, 0, allow), (0x06, 0, 0, deny)]
    return b"".join(struct.pack("HBBI", *insn) for insn in prog)


def docker_profile() -> str:
    """Docker's `seccomp=` security option (JSON): EPERM for DENIED and CONTAINER_DENIED and for
    a clone that makes a namespace, ENOSYS for clone3 (so that libc falls back to clone)."""
    return json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW",
        "syscalls": [{"names": [*DENIED, *CONTAINER_DENIED], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
                     {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
                     *({"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                        "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}
                       for flag in _NAMESPACE_FLAGS)]})
