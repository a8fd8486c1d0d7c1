"""The sandbox's seccomp program, run through a small classic-BPF interpreter for every
architecture it knows (this machine can load only its own; the program must be right for all)."""

import json
import struct

import pytest

from flywheel.sandbox.seccomp import AUDIT_ARCH, DENIED, architecture, docker_profile, seccomp_filter

ALLOW, EPERM = 0x7FFF0000, 0x00050001
ALLOWED = {"x86_64": (0, 1, 56, 57, 59, 231, 257, 435), "aarch64": (56, 63, 64, 93, 94, 220, 221, 435)}


def evaluate(program: bytes, arch: int, nr: int) -> int:
    """The action the program returns for a syscall `nr` of audit architecture `arch`."""
    insns = [struct.unpack("HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = {0: nr, 4: arch}  # struct seccomp_data: nr at 0, arch at 4
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc, pc = data[k], pc + 1
        elif code == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # BPF_JMP | BPF_JGE | BPF_K
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine", sorted(AUDIT_ARCH))
def test_denied_syscalls_get_eperm_and_the_rest_pass(machine):
    arch, denied = architecture(machine)
    program = seccomp_filter(machine)
    assert len(denied) == 16 and len(set(denied)) == 16
    for nr in denied:
        assert evaluate(program, arch, nr) == EPERM, nr
    for nr in ALLOWED[machine]:
        assert evaluate(program, arch, nr) == ALLOW, nr
    assert evaluate(program, 0x40000003, 0) == EPERM  # another architecture (i386's int 0x80)


def test_x32_abi_is_denied_on_x86_64():
    arch, _ = architecture("x86_64")
    assert evaluate(seccomp_filter("x86_64"), arch, 0x40000000 | 1) == EPERM


def test_an_unknown_architecture_gets_no_filter():
    assert seccomp_filter("riscv64") == b""


def test_the_docker_profile_denies_the_same_syscalls():
    profile = json.loads(docker_profile())
    denied = profile["syscalls"][0]
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW" and denied["errnoRet"] == 1
    assert set(DENIED) <= set(denied["names"])
