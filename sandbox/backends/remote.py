"""The `remote` sandbox backend: attempts run on sandbox services (sandbox/service.py) elsewhere.

    --sandbox remote --sandbox-options "urls=http://h1:8700 http://h2:8700,token_file=/path/token"

The token comes from `token_file`, else $FLYWHEEL_SANDBOX_TOKEN, else `token=` (which a run's
run.json would then keep: prefer the other two); an empty one is an error, never "no token"
(web/service_token.py, the rules the service applies too).

Attempts are spread over the servers (each thread starts at the next one, round robin). A server
that is busy or draining (503), unreachable, gone mid-run, or failing on its own side (500) is
an environment failure: the attempt goes to another server after a backoff, up to `retries`
times, and only then is a SandboxError. A run is never half-counted: a server killed mid-run
sends no result, so the attempt runs again elsewhere. What the code did (any 200 result) comes
back unchanged, so the model-vs-environment classification is the remote backend's own. A
kept-alive connection the server has since closed (its idle timeout) is reopened at once, once:
the server read nothing on it, so nothing ran.
"""

from __future__ import annotations

import http.client
import itertools
import json
import threading
import time
from urllib.parse import urlsplit

from flywheel.sandbox.contract import (ExecRequest, ExecResult, SandboxBackend, SandboxError,
                                       refuse_image, refuse_mounts, register_backend)
from flywheel.web.service_token import read_token
from flywheel.sandbox.wire import dump_request, load_result


@register_backend("remote")
class RemoteBackend(SandboxBackend):
    """Thread-safe; one keep-alive connection per thread and server."""

    def __init__(self, urls: str = "", token: str | None = None, token_file: str | None = None,
                 retries: int = 6, backoff_s: float = 0.1, timeout_s: float = 60.0):
        self.urls = [u.rstrip("/") for u in str(urls).replace(",", " ").replace(";", " ").split() if u]
        if not self.urls:
            raise SandboxError("the remote backend needs urls=URL[ URL...] (sandbox services)")
        for url in self.urls:
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                raise SandboxError(f"not an http(s) URL of a sandbox service: {url!r}")
        try:
            self.token = read_token(token_file, token)
        except (OSError, ValueError) as e:
            raise SandboxError(f"cannot use the sandbox service's token: {e}") from None
        self.retries, self.backoff_s, self.timeout_s = retries, backoff_s, timeout_s
        self._next, self._local = itertools.count(), threading.local()
        self._check_one()

    def _check_one(self) -> None:
        """Fail at open, not at the first attempt, when no server answers its health check."""
        problems = []
        for url in self.urls:
            try:
                status, body = self._call(url, "GET", "/health", None, timeout_s=5)
                if status == 200:
                    return
                problems.append(f"{url}: {status} {body[:200]!r}")
            except OSError as e:
                problems.append(f"{url}: {e}")
        raise SandboxError("no sandbox service answered: " + "; ".join(problems))

    def _connection(self, url: str, timeout_s: float) -> http.client.HTTPConnection:
        pool = self._local.__dict__.setdefault("connections", {})
        if url not in pool:
            parts = urlsplit(url)
            kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
            pool[url] = kind(parts.hostname, parts.port, timeout=timeout_s)
        pool[url].timeout = timeout_s
        return pool[url]

    def _call(self, url: str, method: str, path: str, body: bytes | None, timeout_s: float):
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        connection = self._connection(url, timeout_s)
        for fresh in (connection.sock is None, True):
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException) as e:
                connection.close()  # reconnects on the next request
                # closed or reset with no reply on a reused connection: the server's idle timeout
                if fresh or not isinstance(e, (ConnectionResetError, BrokenPipeError)):
                    raise OSError(f"{type(e).__name__}: {e}") from None

    def run(self, request: ExecRequest) -> ExecResult:
        refuse_mounts(request, self.name)  # a host dir of this machine means nothing to a service
        refuse_image(request, self.name)  # the service runs its own backend's image
        body, failures = dump_request(request), []
        start = next(self._next)
        timeout_s = request.limits.timeout_s + self.timeout_s
        for attempt in range(self.retries + 1):
            url = self.urls[(start + attempt) % len(self.urls)]
            try:
                status, data = self._call(url, "POST", "/run", body, timeout_s)
            except OSError as e:
                failures.append(f"{url}: {e}")
            else:
                if status == 200:
                    return load_result(data)
                reason = _error_of(data)
                if status in (400, 401, 404, 405, 411, 413, 415):  # ours or the config's: no other server differs
                    raise SandboxError(f"sandbox service {url} refused the run ({status}): {reason}")
                failures.append(f"{url}: {status} {reason}")
            if attempt < self.retries:
                time.sleep(self.backoff_s * 2 ** min(attempt, 5))
        raise SandboxError(f"no sandbox service ran the attempt after {self.retries + 1} tries: "
                           + "; ".join(failures[-4:]))


def _error_of(data: bytes) -> str:
    try:
        return str(json.loads(data).get("error"))[:300]
    except (ValueError, AttributeError):
        return repr(data[:200])
