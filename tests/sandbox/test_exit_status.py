"""Exit statuses in the shell's convention (bwrap, docker-init) read as the contract's exit codes."""

import signal

from flywheel.sandbox.exit_status import exit_code


def test_a_death_by_signal_reads_popen_style():
    assert exit_code(128 + signal.SIGKILL) == -signal.SIGKILL
    assert exit_code(128 + signal.SIGSEGV) == -signal.SIGSEGV


def test_plain_exits_and_a_command_that_never_ran():
    assert [exit_code(s) for s in (0, 3, 128, 255)] == [0, 3, 128, 255]
    assert exit_code(None) is None
