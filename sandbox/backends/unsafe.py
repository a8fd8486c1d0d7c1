"""The `unsafe-subprocess` backend: supervised children with rlimits, a clean environment and a
leased uid, but NO namespaces: the code sees the host's files, network and processes. For
debugging the sandbox only; it says so on every run.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import PurePosixPath

from flywheel.sandbox.contract import encode_text, refuse_image, refuse_mounts, register_backend
from flywheel.sandbox.supervise import SANDBOX_PATH, SubprocessBackend, limited, result, supervise


@register_backend("unsafe-subprocess")
class UnsafeSubprocessBackend(SubprocessBackend):
    """Each run in a host temp dir, behind prlimit and setpriv only."""

    def _run_leased(self, command, uid, request):
        refuse_mounts(request, self.name)  # no mount namespace: /opt is the host's
        refuse_image(request, self.name)  # the host's own files, never an image's
        logging.getLogger(__name__).warning(
            "sandbox backend 'unsafe-subprocess' isolates nothing (host files, network and "
            "processes are reachable): for debugging only, never for model-generated code")
        with tempfile.TemporaryDirectory(prefix="flywheel-sandbox-") as workdir:
            write_files(workdir, request.files, uid)
            env = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8", "HOME": workdir,
                   "TMPDIR": workdir, "PYTHONDONTWRITEBYTECODE": "1"}  # never the parent's
            outcome = supervise(limited(command, request.limits, uid, self._tools), request, uid,
                                workdir, env)
        return result(outcome, outcome.returncode, request.limits, self.name)


def write_files(workdir: str, files, uid: int | None) -> None:
    """Write `files` under `workdir` (ExecRequest checked that no path escapes it)."""
    for name, text in files.items():
        path = os.path.join(workdir, *PurePosixPath(name).parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(encode_text(text))
    if uid is not None:  # the code may rewrite its own files, and create new ones
        for root, dirs, names in os.walk(workdir):
            for entry in [root] + [os.path.join(root, n) for n in dirs + names]:
                os.chown(entry, uid, uid)
