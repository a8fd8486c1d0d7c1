"""The sandbox service: any backend behind HTTP, for rollout workers that do not run sandboxes.

    flywheel sandbox serve --host 0.0.0.0 --port 8700 --token-file T [--backend local] [--capacity 8]

POST /run takes an ExecRequest as JSON (sandbox/wire.py) and answers its ExecResult (200); GET
/health answers {"status": "ok"|"draining", "running": n, "capacity": n, "connections": n,
"backend": name}. At capacity a run is refused at once with 503 {"error": "busy"} (backpressure
the client acts on, never a timeout); while draining (SIGTERM, or `drain()`), new runs get 503
{"error": "draining"} and the runs in flight finish. A failure of the sandbox itself is 500
{"error": ..., "kind": "environment"}: the client retries it elsewhere; what the code did is
always a 200 result, so the model-vs-environment line is the backend's own.

Every request passes the same gate, from its headers alone, before a byte of its body is read:
where it comes from (web/same_origin.py: a Host this service answers to, no foreign Origin or
cross-site fetch: 400/403; `--allowed-host` adds names), the bearer token (401, on every path
and method, known or not), then its framing (a
Transfer-Encoding, a duplicated or non-decimal Content-Length, a header line that did not parse:
411/400; POST /run without a length: 411; over `max_body`: 413), then its endpoint (404, 405),
then a JSON Content-Type for POST /run (415: a page elsewhere cannot send one unasked). A refused request's connection is
closed, so an unread body is never taken for the next request. Connections, and the time each
phase of a request may take, are bounded too (web/service_limits.py); a service beyond
loopback without a token is refused (web/service_token.py).
"""

from __future__ import annotations

import logging
import threading

from flywheel.sandbox.contract import SandboxBackend, SandboxError
from flywheel.web.gated_http import CappedServer, GatedHandler
from flywheel.web.service_limits import Refused, ServiceLimits
from flywheel.web.service_token import bearer_matches, check_exposure, check_token
from flywheel.sandbox.wire import dump_result, load_request

ENDPOINTS = {"/run": "POST", "/health": "GET"}
log = logging.getLogger(__name__)


class SandboxService(CappedServer):
    """An HTTP server running requests on `backend`, at most `capacity` at a time, holding at
    most `limits.max_connections` connections."""

    label = "sandbox service"

    def __init__(self, backend: SandboxBackend, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, capacity: int = 8, limits: ServiceLimits = ServiceLimits(),
                 allowed_hosts=()):
        token = None if token is None else check_token(token)
        check_exposure(host, token)
        super().__init__(host, port, _Handler, limits, allowed_hosts)
        self.backend, self.token, self.capacity = backend, token, capacity
        self.running, self.draining = 0, False
        self._lock, self._idle = threading.Lock(), threading.Condition()

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


class _Handler(GatedHandler):
    endpoints = ENDPOINTS
    server: SandboxService

    def authorize(self) -> None:
        if not bearer_matches(self.server.token, self.headers.get_all("Authorization") or []):
            raise Refused(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    def do_GET(self):  # noqa: N802 (http.server's name; the gate let only GET /health through)
        server = self.server
        self.reply(200, {"status": "draining" if server.draining else "ok", "running": server.running,
                         "capacity": server.capacity, "connections": server.connections,
                         "backend": server.backend.name})

    def do_POST(self):  # noqa: N802 (only POST /run, its length checked)
        body = self.read_body()
        if body is None:  # the client closed mid-body: nobody to answer
            return
        try:
            request = load_request(body)
        except ValueError as e:
            return self.reply(400, {"error": str(e), "kind": "input"})
        refused = self.server.admit()
        if refused:
            return self.reply(503, {"error": refused})
        try:
            result = self.server.backend.run(request)
        except SandboxError as e:
            return self.reply(500, {"error": str(e), "kind": "environment"})
        except Exception as e:  # the backend's own defect: still the environment's side
            log.exception("sandbox backend failed")
            return self.reply(500, {"error": f"{type(e).__name__}: {e}", "kind": "environment"})
        finally:
            self.server.release()
        self.reply(200, dump_result(result))

