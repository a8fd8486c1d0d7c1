"""Which sandbox a run directory may choose by itself.

A run directory may come from someone else (a shared bucket, a colleague's run), and its run.json
names the sandbox backend that runs model code. Resuming it (`flywheel run --run-dir D`) or
replaying it (`flywheel replay`) takes that name only when the backend isolates the code on this
machine; any other must be named on the command line by the user, who then chooses to trust it:
`unsafe-subprocess` isolates nothing, `remote` sends the episodes, and the user's sandbox token,
to the servers the run names, and a plugin this list does not know is not known to isolate.
"""

from __future__ import annotations

RUN_MAY_CHOOSE = ("local", "docker")  # each runs the code isolated on this machine
_WHY_NOT = {"unsafe-subprocess": "isolates nothing (the code would see this machine's files, "
                                 "network and processes)",
            "remote": "sends the episodes, and your sandbox token, to servers the run names"}


def not_for_a_run_to_choose(backend: str) -> str | None:
    """None when a run directory may choose `backend` by itself, else why not (a clause)."""
    if backend in RUN_MAY_CHOOSE:
        return None
    return _WHY_NOT.get(backend, "is not known to isolate the code it runs")
