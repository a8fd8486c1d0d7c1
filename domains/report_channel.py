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
