"""Sandbox sessions for multi-turn episodes: files kept across turns, snapshots, a replayable log.

    with SandboxSession(get_backend("local"), {"main.py": code, "test_main.py": tests}) as s:
        s.run(("python", "-m", "unittest"))          # turn 1: read the failure
        s.write({"main.py": fixed})                   # turn 2: the model edits
        s.run(("python", "-m", "unittest"))
        s.restore()                                   # back to the task's initial files
    SandboxSession.replay(backend, s.initial_files, s.log)   # later: the same commands, same results

A session is one dedicated warm fork server of the `local` backend (one bwrap sandbox, one leased
uid) whose work dir outlives the turns: each turn still runs in a fresh child with its own pid,
network and ipc namespaces, so nothing a turn leaves *running* survives it, but what it writes
does. Snapshots live in the server's memory, out of the code's reach; a restore is a few ms.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence

from flywheel.sandbox.contract import ExecRequest, ExecResult, Limits, SandboxError
from flywheel.sandbox.pool import to_result


class SandboxSession:
    def __init__(self, backend, files: Mapping[str, str], limits: Limits = Limits()):
        if not hasattr(backend, "start_server"):
            raise SandboxError(f"sandbox backend {backend.name!r} has no sessions; use 'local'")
        ExecRequest(files, ("true",))  # the same path checks as a single run
        self.limits, self.initial_files, self.log = limits, dict(files), []
        self._server = backend.start_server(limits.disk_mb)
        self._call({"op": "write", "files": self.initial_files})
        self._call({"op": "snapshot", "name": "initial"})

    def _call(self, message: dict) -> dict:
        reply = self._server.call(message)
        if "error" in reply:
            raise ValueError(f"session {message['op']} failed: {reply['error']}")
        return reply

    def _record(self, op: str, **args) -> None:
        self.log.append({"op": op, **args})

    def write(self, files: Mapping[str, str]) -> None:
        """Create or overwrite files (the model's edits)."""
        ExecRequest(files, ("true",))
        self._call({"op": "write", "files": dict(files)})
        self._record("write", files=dict(files))

    def delete(self, paths: Sequence[str]) -> None:
        self._call({"op": "delete", "paths": list(paths)})
        self._record("delete", paths=list(paths))

    def run(self, command: Sequence[str], stdin: str = "", limits: Limits | None = None) -> ExecResult:
        """Run `command` in the session's work dir, as one isolated turn."""
        request = ExecRequest({}, tuple(command), stdin, limits or self.limits)
        start = time.monotonic()
        result = to_result(self._server.request(request, keep_workdir=True), request, start)
        self._record("run", command=list(command), stdin=stdin,
                     limits=dataclasses.asdict(request.limits), result=result.to_dict())
        return result

    def files(self) -> dict[str, str]:
        """The work dir's regular files now, as text."""
        return self._call({"op": "read"})["files"]

    def snapshot(self, name: str) -> None:
        self._call({"op": "snapshot", "name": name})
        self._record("snapshot", name=name)

    def restore(self, name: str = "initial") -> None:
        """Put the work dir back as it was at snapshot `name` (default: the task's files)."""
        self._call({"op": "restore", "name": name})
        self._record("restore", name=name)

    def close(self) -> None:
        self._server.close()

    def __enter__(self) -> "SandboxSession":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @classmethod
    def replay(cls, backend, initial_files: Mapping[str, str], log: list[dict]) -> list[dict]:
        """Run a recorded session again; one {"recorded", "replayed", "same"} per run step
        (same: exit code, stdout and stderr match; timings never do)."""
        compared = []
        with cls(backend, initial_files) as session:
            for step in log:
                op, args = step["op"], {k: v for k, v in step.items() if k not in ("op", "result")}
                if op != "run":
                    getattr(session, op)(*args.values())
                    continue
                replayed = session.run(args["command"], args["stdin"], Limits(**args["limits"]))
                recorded = step["result"]
                same = all(recorded[k] == getattr(replayed, k) for k in ("exit_code", "stdout", "stderr"))
                compared.append({"recorded": recorded, "replayed": replayed.to_dict(), "same": same})
        return compared
