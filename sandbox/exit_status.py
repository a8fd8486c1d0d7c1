"""How a run ended, read the same way by every backend: the exit code and why the code stopped.

`exit_code` turns a status in the shell's convention (bwrap's JSON status and docker-init both
report a death by signal N as 128 + N) into the contract's Popen style (-N); `kill_reason` names
the limit that stopped the code when it was not our own timer or output cap.
"""

from __future__ import annotations

import signal

from flywheel.sandbox.contract import Limits, cpu_seconds

_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc")
_PROCESS_MARKERS = ("can't start new thread", "BlockingIOError: [Errno 11]")


def exit_code(status: int | None) -> int | None:
    """The contract's exit code of a shell-convention `status` (None: the command never ran).
    A program that itself exits with 128 + N reads as killed by N, as it would to a shell."""
    if status is None:
        return None
    return -(status - 128) if 128 < status < 128 + signal.NSIG else status


def kill_reason(code: int | None, stderr: str, cpu_ms: float, limits: Limits) -> str | None:
    """Why the code stopped, when it was not our timer or output cap."""
    if code is None:
        return None
    # SIGKILL at the hard limit (the warm pool's pid 1 ignores SIGXCPU); the kernel's accounting
    # can read a hair under the limit it enforced.
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and cpu_ms >= 1000 * cpu_seconds(limits) - 50):
        return "cpu"
    if code != 0 and any(marker in stderr for marker in _MEMORY_MARKERS):
        return "memory"
    if code != 0 and any(marker in stderr for marker in _PROCESS_MARKERS):
        return "processes"
    return "signal" if code < 0 else None
