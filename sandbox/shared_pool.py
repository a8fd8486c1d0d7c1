"""One sandbox backend per worker process, shared by every stage and episode on it.

A rollout's sandboxed stages (Execute, and the Turn stages of episodes: one per turn) each used
to open their own backend in `DoFn.setup()`: on `local`, a warm pool per stage (129 servers, and
as many machine-wide uid slots, for 32 turns). Here they share one, keyed by (backend name,
options), with a reference count: the first `acquire` opens it, the last `release` closes it,
and whatever is still open at process exit is closed then. Its size is the sandbox concurrency
(sandbox/pool.py `CONCURRENCY`, or the run's `pool_size` option), whatever the number of stages.

Beam's `apache_beam.utils.shared.Shared` shares an object between the threads of a process too,
but it holds only a weak reference, released by garbage collection with no close, and shares
across DoFns only through a tag they agree on; a pool of processes and uid leases needs the
deterministic close this reference count gives.

    backend = acquire("local", {"pool_size": 4})   # DoFn.setup
    ...
    release(backend)                               # DoFn.teardown
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from dataclasses import dataclass

from flywheel.sandbox import usage
from flywheel.sandbox.contract import SandboxBackend, get_backend

log = logging.getLogger(__name__)
_LOCK = threading.Lock()


@dataclass
class _Entry:
    backend: SandboxBackend
    refs: int


_OPEN: dict[tuple[str, str], _Entry] = {}


def key(name: str, options: dict | None) -> tuple[str, str]:
    """The registry key of a backend: its name and its options, canonically written."""
    return name, json.dumps(options or {}, sort_keys=True, default=repr)


def acquire(name: str, options: dict | None = None) -> SandboxBackend:
    """This process's backend `name` with `options`, opened on first use; `release` it after."""
    k = key(name, options)
    with _LOCK:  # held while opening: a second stage waits for the first's pool, never opens one
        entry = _OPEN.get(k)
        if entry is None:
            entry = _OPEN[k] = _Entry(get_backend(name, **(options or {})), 0)
            usage.tally("pools_opened")
            log.info("sandbox %s %s opened for this process", name, k[1])
        entry.refs += 1
        return entry.backend


def release(backend: SandboxBackend) -> None:
    """One holder fewer; the last one closes the backend."""
    with _LOCK:
        k = next((k for k, e in _OPEN.items() if e.backend is backend), None)
        if k is None:
            return
        entry = _OPEN[k]
        entry.refs -= 1
        if entry.refs > 0:
            return
        del _OPEN[k]
    _close(k, backend)


def open_backends() -> dict[tuple[str, str], int]:
    """(name, options) -> holders, of the backends open in this process now."""
    with _LOCK:
        return {k: e.refs for k, e in _OPEN.items()}


def _close(k: tuple[str, str], backend: SandboxBackend) -> None:
    backend.close()
    usage.tally("pools_closed")
    log.info("sandbox %s %s closed: %s", *k, usage.snapshot())


@atexit.register
def close_all() -> None:
    """Close every backend still open (a runner that never tore its DoFns down)."""
    with _LOCK:
        entries = list(_OPEN.items())
        _OPEN.clear()
    for k, entry in entries:
        _close(k, entry.backend)
