"""A bounded, token-gated HTTP server: what the sandbox service, `flywheel serve` and the review
page share (service_limits.py holds the bounds, service_token.py the token rules).

- `CappedServer`: a ThreadingHTTPServer holding at most `limits.max_connections` connections (a
  thread each); past the cap a connection is answered `over_cap` at once and closed, without a
  thread. Vanished or stalled clients are logged at debug, anything else in full.
- `GatedHandler`: HTTP/1.1 keep-alive where every request passes a gate from its headers alone
  before a byte of its body is read: where it comes from (web/same_origin.py: a Host this
  server answers to, no foreign Origin or cross-site fetch: 400/403), `authorize()` (401), its
  framing (a Transfer-Encoding, a duplicated or non-decimal Content-Length: 400/411; POST
  without a length: 411; over `max_body`: 413), then its endpoint (404, 405), then for a POST
  its body type (below: 415). A refused request's connection is closed, an
  unread body lingered out, so it is never taken for the next request. Each phase of a request
  has its deadline (DeadlineReader), and `Expect: 100-continue` is answered only past the gate.
  A POST's body must be declared JSON (415 otherwise; `takes_json`), the one type every service
  here reads and the one a page elsewhere cannot send without a CORS preflight.

A subclass names its `endpoints` ({path: method}), answers in `do_GET`/`do_POST` (the body read
with `read_body()`), and may override `authorize` and `refusal_body`.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flywheel.web.same_origin import OriginRule, check_json_type, parse_allowed_host
from flywheel.web.service_limits import (DeadlineReader, Refused, ServiceLimits, content_length,
                                             linger_close, refusal)

log = logging.getLogger(__name__)


class CappedServer(ThreadingHTTPServer):
    """A threading HTTP server with a connection cap; `url` is where it listens."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: socketserver's 5 drops a burst's SYNs (1 s resends)
    over_cap = refusal(503, "Service Unavailable", "too many connections")
    label = "server"  # names it in the logs

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler],
                 limits: ServiceLimits, allowed_hosts=()):
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        allowed_hosts = tuple(allowed_hosts)
        for entry in allowed_hosts:  # a bad --allowed-host is refused before binding
            parse_allowed_host(entry)
        super().__init__((host.strip("[]"), port), handler)
        self.origin_rule = OriginRule(host, self.server_address[1], allowed_hosts)
        self.limits, self.connections = limits, 0
        self._connections_lock = threading.Lock()
        self._connection_slots = threading.BoundedSemaphore(limits.max_connections)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def process_request(self, request, client_address):
        """Runs on the accepting thread: a connection past the cap is answered and closed here,
        without blocking (the reply fits any empty send buffer), and gets no thread."""
        if not self._connection_slots.acquire(blocking=False):
            request.setblocking(False)
            try:
                request.send(self.over_cap)
            except OSError:  # a client gone already needs no answer
                pass
            self.shutdown_request(request)
            return
        with self._connections_lock:
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
        with self._connections_lock:
            self.connections -= 1
        self._connection_slots.release()

    def handle_error(self, request, client_address):
        """A client that vanished or stalled is routine (debug); anything else is logged in full."""
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("connection from %s ended: %s", client_address, sys.exc_info()[1])
        else:
            log.exception("%s: request from %s failed", self.label, client_address)


class GatedHandler(BaseHTTPRequestHandler):
    """One connection's requests, each gated on its headers before its body is read."""

    protocol_version = "HTTP/1.1"  # keep-alive: one connection per client thread
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK stall
    endpoints: dict[str, str] = {}  # path -> the one method it takes
    takes_json = True  # a POST body must be declared application/json (415 otherwise)
    always_headers: dict[str, str] = {}  # sent with every reply
    server: CappedServer

    def setup(self):
        super().setup()
        self.reader = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self.reader)
        self.unread_body = False

    def handle_one_request(self):
        limits = self.server.limits
        self.reader.arm(limits.idle_timeout_s, then=limits.read_timeout_s)
        self.expects_continue, self.length, self.route = False, None, None
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
            self.length = self.gate()
        except Refused as refused:
            self.close_connection = True
            self.unread_body = bool(self.headers.defects or self.headers.get("Transfer-Encoding")) or any(
                value.strip() != "0" for value in self.headers.get_all("Content-Length") or [])
            self.reply(refused.status, self.refusal_body(refused), refused.headers)
            return False
        return not self.expects_continue or super().handle_expect_100()

    def authorize(self) -> None:
        """Raise Refused(401, ...) unless the request may be served (the subclass's rule)."""
        raise Refused(401, "no authorization rule", {"WWW-Authenticate": "Bearer"})

    def refusal_body(self, refused: Refused) -> dict:
        """The JSON a refused request is answered with."""
        return {"error": refused.message}

    def gate(self) -> int | None:
        """The body's length, once headers alone show the request may be served; else Refused."""
        self.route = self.path.split("?", 1)[0]
        self.server.origin_rule.check(self.headers, self.connection.getsockname()[0])
        self.authorize()
        length = content_length(self.headers)
        method = self.endpoints.get(self.route)
        if method is None:
            raise Refused(404, f"no such endpoint {self.route[:200]}")
        if method != self.command:
            raise Refused(405, f"{self.route} takes {method}", {"Allow": method})
        if method == "POST" and length is None:
            raise Refused(411, f"POST {self.route} needs a Content-Length")
        if method == "POST" and length > self.server.limits.max_body:
            raise Refused(413, f"request over {self.server.limits.max_body} bytes")
        if method == "GET" and length:
            raise Refused(400, "GET takes no body")
        if method == "POST" and self.takes_json:
            check_json_type(self.headers)
        return length

    def end_headers(self):
        self.connection.settimeout(self.server.limits.write_timeout_s)  # sendall's total time
        super().end_headers()

    def json_default(self, value):
        """How a value json cannot write goes out (by default: refused)."""
        raise TypeError(f"{type(value).__name__} is not JSON")

    def reply(self, status: int, body: bytes | dict, headers: dict | None = None,
              content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, default=self.json_default).encode()
        self.send_response(status)
        for name, value in {"Content-Type": content_type, "Content-Length": str(len(data)),
                            **self.always_headers, **(headers or {})}.items():
            self.send_header(name, value)
        if status == 503 and "Retry-After" not in (headers or {}):
            self.send_header("Retry-After", "1")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def read_body(self) -> bytes | None:
        """The gated body, within its deadline; None when the client closed mid-body (then
        nobody is left to answer)."""
        self.reader.arm(self.server.limits.body_deadline_s(self.length))
        body = self.rfile.read(self.length)
        if len(body) < self.length:
            self.close_connection = True
            return None
        return body
