"""Exit statuses in the shell's convention (bwrap, docker-init) read as the contract's exit codes."""

import signal

from flywheel.sandbox.contract import Limits
from flywheel.sandbox.exit_status import exit_code, kill_reason


def test_a_death_by_signal_reads_popen_style():
    assert exit_code(128 + signal.SIGKILL) == -signal.SIGKILL
    assert exit_code(128 + signal.SIGSEGV) == -signal.SIGSEGV


def test_plain_exits_and_a_command_that_never_ran():
    assert [exit_code(s) for s in (0, 3, 128, 255)] == [0, 3, 128, 255]
    assert exit_code(None) is None


def test_cpu_needs_the_cpu_time_at_the_limit():
    limits = Limits(cpu_s=2)
    for code in (-signal.SIGXCPU, -signal.SIGKILL):
        assert kill_reason(code, 2000.0, limits) == "cpu"
        assert kill_reason(code, 5.0, limits) == "signal"  # exit(152) through bwrap: no CPU spent
    assert kill_reason(152, 2500.0, limits) is None  # it caught SIGXCPU and exited by itself


def test_memory_only_from_the_kernels_oom_kill():
    assert kill_reason(-signal.SIGKILL, 5.0, Limits(), oom_killed=True) == "memory"
    assert kill_reason(1, 5.0, Limits()) is None and kill_reason(-signal.SIGSEGV, 5.0, Limits()) == "signal"
