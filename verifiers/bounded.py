"""Every verification bounded in time and memory: verifiers run in a worker process.

A verifier is trusted code, but its input is not: a math answer like exp(exp(exp(exp(100)))), a
scorer that hands the answer to sympy, a JSON value nested a thousand deep can hang it or grow
its memory without end. So a `BoundedVerifier` runs each verification in its worker process
(started on first use and kept warm, so imports and caches live on) under RLIMIT_AS, and waits
for the verdict at most `deadline_s`; past it the worker is killed and the next call starts a
fresh one. Parent and worker speak pickled messages over two pipes (multiprocessing's framing);
only trusted values cross them: task, response text, ExecResult out; Verdict or a failure back.

The worker loads only what the run's verifiers need: nothing at start but the registry, then, on
the first verification by a verifier, its module and the heavy packages that module imports
inside its functions (the module's own `WARM_IMPORTS`, a tuple of module names: sympy for math
answers, jsonschema, reasoning-gym), without the memory cap and never charged to a
verification's deadline. A run that scores only with
`repo_tests` or `python_tests` never imports sympy or reasoning-gym. `preload` names verifiers to
warm at start instead (a caller that knows its run's).

    with BoundedVerifier(Bounds(deadline_s=10)) as bounded:
        outcome = bounded.run(get_verifier("math_answer"), task, response, execution)
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import os
import resource
import subprocess
import sys
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

from flywheel.verifiers.registry import Verdict, Verifier, get_verifier

@dataclass(frozen=True)
class Bounds:
    """What one verification may take: wall seconds, and memory beyond the warm worker's own."""
    deadline_s: float = 10.0
    memory_mb: int = 1024
    start_timeout_s: float = 120.0  # a cold worker's imports; never charged to a verification


@dataclass(frozen=True)
class Outcome:
    """A verdict, or why there is none: `failure` is verifier_deadline, verifier_memory,
    verifier_crashed or the exception type the verifier raised; `message` says more."""
    verdict: Verdict | None
    failure: str = ""
    message: str = ""


class BoundedVerifier:
    """One warm worker process; `run` is thread-safe (calls queue on a lock)."""

    def __init__(self, bounds: Bounds = Bounds(), preload: tuple[str, ...] = ()):
        self.bounds = bounds
        self.preload = tuple(preload)  # verifier names warmed as the worker starts
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._to: Connection | None = None
        self._from: Connection | None = None
        self._imported: set[str] = set()

    def run(self, verifier: Verifier, task: dict, response: str, execution=None) -> Outcome:
        with self._lock:
            outcome = self._run_once(verifier, task, response, execution)
            if outcome.failure == "verifier_crashed":  # once more in a fresh worker: the worker may
                outcome = self._run_once(verifier, task, response, execution)  # have died of its parent
            return outcome

    def _run_once(self, verifier: Verifier, task: dict, response: str, execution) -> Outcome:
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        self._warm(verifier)
        try:
            self._to.send(("verify", verifier.name, task, response, execution))
            if not self._from.poll(self.bounds.deadline_s):
                self._stop()
                return Outcome(None, "verifier_deadline", f"no verdict within {self.bounds.deadline_s:g} s")
            status, payload = self._from.recv()
        except (EOFError, OSError):
            code = self._stop()
            return Outcome(None, "verifier_crashed", f"the verifier's worker died (status {code})")
        if status == "ok":
            return Outcome(payload)
        if status == "verifier_memory":
            self._stop()  # a MemoryError can leave any state half-built: start clean
        return Outcome(None, status if status == "verifier_memory" else payload[0], payload[-1])

    def _warm(self, verifier: Verifier) -> None:
        """Import `verifier`'s module and its WARM_IMPORTS in the worker, once per worker:
        warm-up, uncapped, not on the deadline."""
        if verifier.fn.__module__ not in self._imported:
            self._call(("import", verifier.fn.__module__), self.bounds.start_timeout_s)
            self._imported.add(verifier.fn.__module__)

    def loaded_modules(self) -> set[str]:
        """The modules the worker has imported (its `sys.modules`), starting it if need be."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            status, names = self._call(("modules",), self.bounds.start_timeout_s)
            return set(names) if status == "ok" else set()

    def close(self) -> None:
        with self._lock:
            self._stop()

    def __enter__(self) -> BoundedVerifier:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, request: tuple, timeout_s: float):
        self._to.send(request)
        if not self._from.poll(timeout_s):
            self._stop()
            raise RuntimeError(f"the verifier worker did not answer {request[0]} in {timeout_s:g} s")
        return self._from.recv()

    def _start(self) -> None:
        self._stop()
        to_read, to_write = os.pipe()
        from_read, from_write = os.pipe()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "flywheel.verifiers.bounded", str(to_read), str(from_write),
             str(self.bounds.memory_mb)],
            pass_fds=(to_read, from_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            env=env)
        os.close(to_read)
        os.close(from_write)
        self._to, self._from = Connection(to_write, readable=False), Connection(from_read, writable=False)
        self._imported = set()
        # the worker imports what this process can (plugin verifiers)
        self._call(("start", list(sys.path)), self.bounds.start_timeout_s)
        for name in self.preload:
            self._warm(get_verifier(name))

    def _stop(self) -> int | None:
        proc, self._proc = self._proc, None
        for conn in (self._to, self._from):
            if conn is not None:
                conn.close()
        self._to = self._from = None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        return proc.wait()


_SHARED: dict[Bounds, BoundedVerifier] = {}
_SHARED_LOCK = threading.Lock()


def shared(bounds: Bounds = Bounds()) -> BoundedVerifier:
    """This process's worker for `bounds`, for callers that hold none of their own; closed at exit."""
    with _SHARED_LOCK:
        if bounds not in _SHARED:
            _SHARED[bounds] = BoundedVerifier(bounds)
            atexit.register(_SHARED[bounds].close)
        return _SHARED[bounds]


def _die_with_parent() -> None:
    """SIGKILL this worker when its parent goes (a hung verification must not outlive the run).
    Linux sends it when the parent's starting thread ends, so `run` retries a dead worker once."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))


def _cap_memory(memory_mb: int | None) -> None:
    """Soft RLIMIT_AS at what the worker holds now plus `memory_mb`; None lifts it (imports)."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = hard if memory_mb is None else _vm_bytes() + memory_mb * 2**20
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _handle(request: tuple, memory_mb: int):
    """("import", module): import the module that registers a verifier and what it imports
    inside its functions (its `WARM_IMPORTS`), uncapped, then cap again above them; ("modules",): the
    names in sys.modules; ("verify", name, task, response, execution): its Verdict."""
    if request[0] == "import":
        if request[1] != "__main__":
            _cap_memory(None)
            try:
                module = importlib.import_module(request[1])
                for name in getattr(module, "WARM_IMPORTS", ()):
                    if importlib.util.find_spec(name.split(".")[0]) is not None:
                        importlib.import_module(name)
            finally:
                _cap_memory(memory_mb)
        return None
    if request[0] == "modules":
        return sorted(sys.modules)
    _, name, task, response, execution = request
    return get_verifier(name)(task, response, execution)


def serve(read_fd: int, write_fd: int, memory_mb: int) -> None:
    """The worker: cap memory at what it holds plus `memory_mb`, then verify until EOF. It
    imports each verifier's module when told to (`_handle`), nothing else ahead."""
    _die_with_parent()
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    sys.path[:] = inbox.recv()[1]
    _cap_memory(memory_mb)
    outbox.send("ready")
    while True:
        try:
            request = inbox.recv()
        except EOFError:
            return
        try:
            reply = ("ok", _handle(request, memory_mb))
        except MemoryError:
            reply = ("verifier_memory", (f"the verifier exceeded its {memory_mb} MB",))
        except BaseException as e:  # noqa: BLE001  every failure goes back as data
            where = "".join(traceback.format_exception(e)[-3:])
            reply = ("raised", (type(e).__name__, f"{e or repr(e)}\n{where}"[:4000]))
        outbox.send(reply)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
