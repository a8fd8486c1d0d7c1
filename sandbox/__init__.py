"""Run untrusted programs under limits and report what the kernel says happened.

The contract (`ExecRequest` in, `ExecResult` out, `SandboxError` when the sandbox itself fails)
and the backend registry (`BACKENDS`), whose home is backends/, one module per backend: `local`
(bubblewrap + warm pool), `docker` (and gVisor), `unsafe-subprocess` (debugging only). Imports
nothing of Flywheel but its plugin registry.
"""

from flywheel.sandbox.contract import (BACKENDS, KILL_REASONS, ExecRequest, ExecResult, Limits,
                                       SandboxBackend, SandboxError, available_backends,
                                       backend_class, check_options, get_backend,
                                       register_backend)

__all__ = ["BACKENDS", "KILL_REASONS", "ExecRequest", "ExecResult", "Limits", "SandboxBackend",
           "SandboxError", "available_backends", "backend_class", "check_options", "get_backend",
           "register_backend"]
