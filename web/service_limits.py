"""What bounds the sandbox service: body size, connections, and the time each read may take.

A client can hold a server by its connections and its slowness as surely as by its requests, so
every one of them is bounded (sandbox/service.py applies these):

- `max_body`: a run's files live in its work dir, 64 MiB by default (`Limits.disk_mb`), so a
  request body past that is refused (413) before a byte of it is read.
- `max_connections`: each connection is a thread; past the cap a new one is answered 503 busy
  and closed at once (the `remote` client retries it elsewhere), so idle or slow clients cannot
  starve the machine of threads.
- deadlines, not per-read timeouts: a socket timeout restarts at every byte, so a client sending
  one byte a second never trips it. `DeadlineReader` gives each phase a total deadline instead:
  `idle_timeout_s` for the next request to begin on a kept-alive connection, then
  `read_timeout_s` for its request line and headers, then for the body `read_timeout_s` plus
  its length at `min_body_rate`; writing a reply gets `write_timeout_s`.
"""

from __future__ import annotations

import io
import json
import re
import socket
import time
from dataclasses import dataclass
from email.message import Message

MAX_BODY = 64 << 20  # = the default work dir (Limits.disk_mb): bigger files could not be written
_LENGTH = re.compile(r"[0-9]{1,18}")  # plain decimal: int() would also take "+5", "5_0", "٥"


@dataclass(frozen=True)
class ServiceLimits:
    """The service's bounds; the defaults suit a pool of rollout workers on one network."""

    max_body: int = MAX_BODY
    max_connections: int = 256       # threads; more connections are answered 503 and closed
    idle_timeout_s: float = 15.0     # a kept-alive connection waiting for its next request
    read_timeout_s: float = 10.0     # request line and headers, in all; the body's allowance
    min_body_rate: int = 1 << 20     # bytes/s a body must average beyond read_timeout_s
    write_timeout_s: float = 30.0    # a reply the client does not read

    def __post_init__(self):
        for name in ("max_body", "max_connections", "idle_timeout_s", "read_timeout_s",
                     "min_body_rate", "write_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)!r}")

    def body_deadline_s(self, length: int) -> float:
        return self.read_timeout_s + length / self.min_body_rate


class Refused(Exception):
    """A request answered with `status` and closed, its body (if any) never read."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def content_length(headers: Message) -> int | None:
    """A request's body length from its headers, None when it declares none; Refused for a
    header line that did not parse or was folded (400: such a line is dropped or merged, so a
    Content-Length in it would be read by one parser and not another), any Transfer-Encoding
    (411: a chunked body has no length to check before reading it), more than one
    Content-Length (400: where the body ends must not depend on which one is read), or one that
    is not a plain decimal (400: "-1" or "abc" must not mean "read until the client closes")."""
    if headers.defects or any("\n" in value for value in headers.values()):
        raise Refused(400, "malformed or folded header line")
    if headers.get_all("Transfer-Encoding"):
        raise Refused(411, "Transfer-Encoding is not accepted: send the body with a Content-Length")
    values = headers.get_all("Content-Length") or []
    if len(values) > 1:
        raise Refused(400, "more than one Content-Length")
    if not values:
        return None
    if not _LENGTH.fullmatch(values[0].strip()):
        raise Refused(400, f"Content-Length must be a non-negative decimal, not {values[0][:40]!r}")
    return int(values[0])


def refusal(status: int, reason: str, error: str | dict) -> bytes:
    """A whole HTTP/1.1 reply that closes the connection: what an over-cap connection gets
    from the accepting thread, which must never block on it. Its body is {"error": error}, or
    `error` itself when it is a dict (an API's own error shape)."""
    body = json.dumps(error if isinstance(error, dict) else {"error": error}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n").encode() + body


class DeadlineReader(io.RawIOBase):
    """A socket's reading side where every phase has a total deadline (`arm`); a read past it
    raises TimeoutError, which http.server answers by dropping the connection."""

    def __init__(self, sock: socket.socket):
        self.sock, self.deadline, self._then = sock, time.monotonic(), None

    def arm(self, seconds: float, then: float | None = None) -> None:
        """Allow `seconds` from now; with `then`, once the first byte arrives allow `then` from
        that byte instead (idle until a request starts, then a deadline for the request)."""
        self.deadline, self._then = time.monotonic() + seconds, then

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("read deadline passed")
        self.sock.settimeout(left)
        n = self.sock.recv_into(buffer)
        if n and self._then is not None:
            self.deadline, self._then = time.monotonic() + self._then, None
        return n


def linger_close(sock: socket.socket, seconds: float = 1.0, most: int = 1 << 20) -> None:
    """Stop sending, then discard what the client still sends, for a bounded time and amount.
    Closing with unread bytes queued makes the kernel send a reset, which can destroy the reply
    (401, 413) before the client reads it (RFC 9112 section 9.6, "lingering close")."""
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline, seen = time.monotonic() + seconds, 0
        while seen < most and (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            data = sock.recv(65536)
            if not data:
                return
            seen += len(data)
    except OSError:
        pass
