"""The harness's report line, authenticated: only a line carrying the run's nonce is a report.

A harness prints one report line (its domain's marker, then JSON) on the sandbox's stdout, and the
code it tests runs beside it. On Linux that code cannot reach the harness's stdout (the harness
makes itself non-dumpable), but gVisor lets a process reopen another's /proc/N/fd whatever its
dumpable flag, so there the code could write a report of its own. So every run's plan carries
the marker followed by a fresh random nonce, which only the harness sees (its stdin, drained
before the code starts); the trusted side keeps the lines that carry the nonce, without it, and
turns every other line that starts with the marker into a FORGED one: never read as a report,
always flagged. Lines are split as the verifiers split them (str.splitlines).
"""

from __future__ import annotations

import secrets
from typing import Any

from flywheel.domains.untrusted_text import Unreadable, load_json

FORGED = "FORGED "


def new_nonce() -> str:
    return secrets.token_hex(16)


def signed(marker: str, nonce: str) -> str:
    """What the harness is told to start its report line with."""
    return f"{marker}{nonce} " if nonce else marker


def authenticate(stdout: str, marker: str, nonce: str) -> str:
    """`stdout` with the nonce taken off the harness's own report lines and FORGED put before
    every other line that would read as a report."""
    if not nonce:
        return stdout
    mine, lines = signed(marker, nonce), stdout.splitlines(keepends=True)
    return "".join(marker + line[len(mine):] if line.startswith(mine)
                   else FORGED + line if line.startswith(marker) else line for line in lines)


def harness_report(execution: Any, marker: str) -> tuple[dict | None, str, list[str]]:
    """(report, problem, flags): the harness's last report line, or None and why there is none.

    Only the harness writes to the sandbox's stdout, and it writes its one report last, then exits
    0; anything else means it did not finish. A line the run's nonce did not sign (FORGED, see
    domains/report_channel.py) is never a report. Killed by a signal that no limit explains means the
    untrusted code killed it, and more than one report line means something forged one: flagged.
    """
    if execution is None:
        raise ValueError("this verifier needs the sandbox's execution result")
    all_lines = execution.stdout.splitlines()
    lines = [line for line in all_lines if line.startswith(marker)]
    forged = len(lines) > 1 or any(line.startswith(FORGED + marker) for line in all_lines)
    flags = ["forged_report"] if forged else []  # the harness prints exactly one, last
    if lines and execution.exit_code == 0 and not execution.kill_reason:
        try:
            report = load_json(lines[-1][len(marker):])
        except Unreadable as e:  # the nonce makes it the harness's own line: still read it totally
            return None, f"the harness's report is unreadable: {e}", flags
        if isinstance(report, dict):
            return report, "", flags
    reason = execution.kill_reason or f"exit code {execution.exit_code}"
    flags += ["killed_harness"] if execution.kill_reason == "signal" else []
    return None, f"the harness did not report ({reason}): {execution.stderr[-300:]}", flags
