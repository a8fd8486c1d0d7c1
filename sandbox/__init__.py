"""Run untrusted programs under limits and report what the kernel says happened.

The contract (`ExecRequest` in, `ExecResult` out, `SandboxError` when the sandbox itself fails)
and the backend registry; backends: `local` (bubblewrap + warm pool), `docker` (and gVisor),
`unsafe-subprocess` (debugging only). Imports nothing of Flywheel but its plugin registry.
"""

from flywheel.sandbox.contract import (KILL_REASONS, ExecRequest, ExecResult, Limits,
                                       SandboxBackend, SandboxError, available_backends,
                                       get_backend, register_backend)

__all__ = ["KILL_REASONS", "ExecRequest", "ExecResult", "Limits", "SandboxBackend", "SandboxError",
           "available_backends", "get_backend", "register_backend"]
