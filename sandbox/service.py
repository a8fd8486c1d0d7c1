"""The sandbox service: any backend behind HTTP, for rollout workers that do not run sandboxes.

    flywheel sandbox serve --host 0.0.0.0 --port 8700 --token-file T [--backend local] [--capacity 8]

POST /run takes an ExecRequest as JSON (sandbox/wire.py) and answers its ExecResult (200); GET
/health answers {"status": "ok"|"draining", "running": n, "capacity": n, "backend": name}. A
bearer token is required when one is set (401 otherwise). At capacity a run is refused at once
with 503 {"error": "busy"} (backpressure the client acts on, never a timeout); while draining
(SIGTERM, or `drain()`), new runs get 503 {"error": "draining"} and the runs in flight finish.
A failure of the sandbox itself is 500 {"error": ..., "kind": "environment"}: the client retries
it elsewhere; what the code did is always a 200 result, so the model-vs-environment line is the
backend's own, unchanged by the network.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flywheel.sandbox.contract import SandboxBackend, SandboxError
from flywheel.sandbox.wire import dump_result, load_request

MAX_BODY = 256 << 20
log = logging.getLogger(__name__)


class SandboxService(ThreadingHTTPServer):
    """An HTTP server running requests on `backend`, at most `capacity` at a time."""

    daemon_threads = True

    def __init__(self, backend: SandboxBackend, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, capacity: int = 8):
        super().__init__((host, port), _Handler)
        self.backend, self.token, self.capacity = backend, token, capacity
        self.running, self.draining = 0, False
        self._lock, self._idle = threading.Lock(), threading.Condition()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def admit(self) -> str | None:
        """None when a run may start now (counted as running), else why not."""
        with self._lock:
            if self.draining:
                return "draining"
            if self.running >= self.capacity:
                return "busy"
            self.running += 1
            return None

    def release(self) -> None:
        with self._lock:
            self.running -= 1
        with self._idle:
            self._idle.notify_all()

    def drain(self, timeout_s: float | None = None) -> bool:
        """Refuse new runs and wait for the ones in flight; True when none is left."""
        with self._lock:
            self.draining = True
        with self._idle:
            return self._idle.wait_for(lambda: self.running == 0, timeout_s)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK stall
    server: SandboxService

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        log.debug("%s " + format, self.address_string(), *args)

    def _reply(self, status: int, body: bytes | dict) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 503:
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        token = self.server.token
        given = self.headers.get("Authorization", "")
        return token is None or hmac.compare_digest(given.encode(), f"Bearer {token}".encode())

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path != "/health":
            return self._reply(404, {"error": f"no such endpoint {self.path}"})
        if not self._authorized():
            return self._reply(401, {"error": "missing or wrong bearer token"})
        server = self.server
        self._reply(200, {"status": "draining" if server.draining else "ok", "running": server.running,
                          "capacity": server.capacity, "backend": server.backend.name})

    def do_POST(self):  # noqa: N802
        size = int(self.headers.get("Content-Length") or 0)
        if self.path != "/run":
            self.rfile.read(min(size, MAX_BODY))
            return self._reply(404, {"error": f"no such endpoint {self.path}"})
        if size > MAX_BODY:
            self.close_connection = True
            return self._reply(413, {"error": f"request over {MAX_BODY} bytes"})
        body = self.rfile.read(size)
        if not self._authorized():
            return self._reply(401, {"error": "missing or wrong bearer token"})
        try:
            request = load_request(body)
        except ValueError as e:
            return self._reply(400, {"error": str(e), "kind": "input"})
        refused = self.server.admit()
        if refused:
            return self._reply(503, {"error": refused})
        try:
            result = self.server.backend.run(request)
        except SandboxError as e:
            return self._reply(500, {"error": str(e), "kind": "environment"})
        except Exception as e:  # the backend's own defect: still the environment's side
            log.exception("sandbox backend failed")
            return self._reply(500, {"error": f"{type(e).__name__}: {e}", "kind": "environment"})
        finally:
            self.server.release()
        self._reply(200, dump_result(result))
