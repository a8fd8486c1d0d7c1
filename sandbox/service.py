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
the bearer token (401, on every path and method, known or not), then its framing (a
Transfer-Encoding, a duplicated or non-decimal Content-Length, a header line that did not parse:
411/400; POST /run without a length: 411; over `max_body`: 413), then its endpoint (404, 405). A refused request's connection is
closed, so an unread body is never taken for the next request. Connections, and the time each
phase of a request may take, are bounded too (sandbox/service_limits.py); a service beyond
loopback without a token is refused (sandbox/service_token.py).
"""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flywheel.sandbox.contract import SandboxBackend, SandboxError
from flywheel.sandbox.service_limits import (DeadlineReader, Refused, ServiceLimits, content_length,
                                             linger_close, refusal)
from flywheel.sandbox.service_token import bearer_matches, check_exposure, check_token
from flywheel.sandbox.wire import dump_result, load_request

ENDPOINTS = {"/run": "POST", "/health": "GET"}
_OVER_CAP = refusal(503, "Service Unavailable", "too many connections")
log = logging.getLogger(__name__)


class SandboxService(ThreadingHTTPServer):
    """An HTTP server running requests on `backend`, at most `capacity` at a time, holding at
    most `limits.max_connections` connections."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: socketserver's 5 drops a burst's SYNs (1 s resends)

    def __init__(self, backend: SandboxBackend, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, capacity: int = 8, limits: ServiceLimits = ServiceLimits()):
        token = None if token is None else check_token(token)
        check_exposure(host, token)
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host.strip("[]"), port), _Handler)
        self.backend, self.token, self.capacity, self.limits = backend, token, capacity, limits
        self.running, self.draining = 0, False
        self._lock, self._idle = threading.Lock(), threading.Condition()
        self._connections = threading.BoundedSemaphore(limits.max_connections)
        self.connections = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def process_request(self, request, client_address):
        """Runs on the accepting thread: a connection past the cap is answered and closed here,
        without blocking (the reply fits any empty send buffer), and gets no thread."""
        if not self._connections.acquire(blocking=False):
            request.setblocking(False)
            try:
                request.send(_OVER_CAP)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        with self._lock:
            self.connections += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release_connection()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release_connection()

    def _release_connection(self) -> None:
        with self._lock:
            self.connections -= 1
        self._connections.release()

    def handle_error(self, request, client_address):
        """A client that vanished or stalled is routine (debug); anything else is logged in full."""
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("connection from %s ended: %s", client_address, sys.exc_info()[1])
        else:
            log.exception("sandbox service: request from %s failed", client_address)

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

    def setup(self):
        super().setup()
        self.reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self.reader)
        self.unread_body = False

    def handle_one_request(self):
        limits = self.server.limits
        self.reader.arm(limits.idle_timeout_s, then=limits.read_timeout_s)
        self.expects_continue, self.length = False, None
        super().handle_one_request()

    def finish(self):
        super().finish()
        if self.unread_body:
            linger_close(self.connection)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        log.debug("%s " + format, self.address_string(), *args)

    def handle_expect_100(self):
        """`Expect: 100-continue` invites the body: only once the gate has passed (parse_request)."""
        self.expects_continue = True
        return True

    def parse_request(self) -> bool:
        """http.server's parsing, then the gate; False (answered, closing) when it refuses."""
        if not super().parse_request():
            return False
        try:
            self.length = self._gate()
        except Refused as refused:
            self.close_connection = True
            self.unread_body = bool(self.headers.defects or self.headers.get("Transfer-Encoding")) or any(
                value.strip() != "0" for value in self.headers.get_all("Content-Length") or [])
            self._reply(refused.status, {"error": refused.message}, refused.headers)
            return False
        return not self.expects_continue or super().handle_expect_100()

    def _gate(self) -> int | None:
        """The body's length, once headers alone show the request may be served; else Refused."""
        if not bearer_matches(self.server.token, self.headers.get_all("Authorization") or []):
            raise Refused(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        length = content_length(self.headers)
        method = ENDPOINTS.get(self.path)
        if method is None:
            raise Refused(404, f"no such endpoint {self.path[:200]}")
        if method != self.command:
            raise Refused(405, f"{self.path} takes {method}", {"Allow": method})
        if method == "POST" and length is None:
            raise Refused(411, "POST /run needs a Content-Length")
        if method == "POST" and length > self.server.limits.max_body:
            raise Refused(413, f"request over {self.server.limits.max_body} bytes")
        if method == "GET" and length:
            raise Refused(400, "GET takes no body")
        return length

    def end_headers(self):
        self.connection.settimeout(self.server.limits.write_timeout_s)  # sendall's total time
        super().end_headers()

    def _reply(self, status: int, body: bytes | dict, headers: dict | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if status == 503:
            self.send_header("Retry-After", "1")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (http.server's name; the gate let only GET /health through)
        server = self.server
        self._reply(200, {"status": "draining" if server.draining else "ok", "running": server.running,
                          "capacity": server.capacity, "connections": server.connections,
                          "backend": server.backend.name})

    def do_POST(self):  # noqa: N802 (only POST /run, its length checked)
        self.reader.arm(self.server.limits.body_deadline_s(self.length))
        body = self.rfile.read(self.length)
        if len(body) < self.length:  # the client closed mid-body: nobody to answer
            self.close_connection = True
            return
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
