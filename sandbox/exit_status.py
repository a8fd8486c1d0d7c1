"""How a run ended, read the same way by every backend: the exit code and why the code stopped.

`exit_code` turns a status in the shell's convention (bwrap's JSON status and docker's entry both
report a death by signal N as 128 + N) into the contract's Popen style (-N); `kill_reason` names
the limit that stopped the code when it was not our own timer or output cap.

A kill reason rests on the kernel's word only: the wait status, the CPU time rusage (or, on
docker, the container's pid-1 entry) measured, and the kernel's own OOM kill of a memory cgroup.
Never on what the code printed, and never on an exit status alone where the code could have
chosen it: `sys.exit(152)` reads as 128 + SIGXCPU through bwrap or docker, so "cpu" needs
the CPU time at the limit as well. What each reason means:

- "cpu": killed by SIGXCPU or SIGKILL with its CPU time at the limit (RLIMIT_CPU enforced it;
  rusage may read under it: half the limit is required).
- "memory": the kernel's OOM killer killed a process of the run's memory cgroup (docker). An
  allocation refused under RLIMIT_AS (the `local` and `unsafe-subprocess` backends) is the code's
  own exception, e.g. MemoryError and exit 1: a failed run, not a kill (kill_reason None).
- "processes": never inferred. A fork or thread refused under the process limit is likewise the
  code's own exception; the name stays in the contract for a backend that can prove it.
- "signal": died by a signal no limit explains (where the status comes in the shell's
  convention, also a code that exited with 128 + N itself: both are the code's own doing).
"""

from __future__ import annotations

import signal

from flywheel.sandbox.contract import Limits, cpu_seconds

# rusage was seen to read well under the limit the kernel enforced on a loaded machine (12% and
# more); a run that spent half its CPU limit and then died by SIGKILL or SIGXCPU did spend it
_CPU_SLACK = 0.5


def exit_code(status: int | None) -> int | None:
    """The contract's exit code of a shell-convention `status` (None: the command never ran).
    A program that itself exits with 128 + N reads as killed by N, as it would to a shell."""
    if status is None:
        return None
    return -(status - 128) if 128 < status < 128 + signal.NSIG else status


def kill_reason(code: int | None, cpu_ms: float, limits: Limits, oom_killed: bool = False) -> str | None:
    """Why the code stopped, when it was not our timer or output cap: from the exit code, the CPU
    time the kernel measured, and whether the kernel's OOM killer struck (`oom_killed`)."""
    if code is None:
        return None
    if oom_killed:
        return "memory"
    # SIGXCPU at the soft limit, SIGKILL at the hard one (the warm pool's pid 1 ignores SIGXCPU).
    if code in (-signal.SIGXCPU, -signal.SIGKILL) and cpu_ms >= 1000 * cpu_seconds(limits) * _CPU_SLACK:
        return "cpu"
    return "signal" if code < 0 else None
