"""What a backend that cannot honour part of a request does: it refuses it with a SandboxError
naming that part and itself (an environment error, never the model's), before running anything.
The mounts and image tests check `remote` and `unsafe-subprocess` the same way through this."""

import pytest

from flywheel.sandbox import SandboxError, get_backend
from flywheel.sandbox.backends.remote import RemoteBackend


def assert_refused_where_unsupported(request, what: str) -> None:
    """`remote` and `unsafe-subprocess` both refuse `request`, saying "`what` are not supported"."""
    remote = RemoteBackend.__new__(RemoteBackend)  # no service needed: it refuses before calling
    remote.name = "remote"
    with pytest.raises(SandboxError, match=f"{what} are not supported by the 'remote'"):
        remote.run(request)
    with get_backend("unsafe-subprocess") as backend:
        with pytest.raises(SandboxError, match=f"{what} are not supported by the 'unsafe-subprocess'"):
            backend.run(request)
