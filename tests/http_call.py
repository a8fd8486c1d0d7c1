"""One HTTP request to a Flywheel server under test (serve, the review page), as a reply: the
feedback tests' `call` helpers speak JSON with a bearer token through this."""

import json
import urllib.error
import urllib.request


def http_call(url: str, body=None, token: str | None = None, method: str | None = None,
              timeout: float = 10) -> tuple[int, object, bytes]:
    """(status, headers, raw body) of one request to `url`: `body` sent as JSON (bytes as they
    are), `token` as `Authorization: Bearer`; an HTTP error is a reply like any other."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.headers, reply.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
