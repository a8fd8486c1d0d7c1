"""Services on loopback are not trusted by where they listen (web/same_origin.py, applied in
web/gated_http.py's gate): the same table of requests a hostile web page can make through a
browser (a foreign or rebinding Host, a foreign Origin, a cross-site fetch, a body of a type it
may send unasked) against each of the three real services on 127.0.0.1, spoken to with raw
sockets and a valid token, so that nothing but where the request comes from can refuse it.

A request that passes the gate reaches its endpoint, which answers in its own way (a body that
is not a valid request, an attempt or interaction that does not exist): `reached` tells the two
apart, and nothing is ever recorded or run.
"""

import contextlib
import http.client
import socket
import threading

import pytest

from flywheel.cli.serve import load_policy
from flywheel.feedback.review_page import ReviewServer
from flywheel.feedback.serve import ChatServer
from flywheel.feedback.serve_recorder import TableRecorder
from flywheel.sandbox import backend_class, get_backend
from flywheel.sandbox.service import SandboxService

TOKEN = "origin-test-token"
JSON = "application/json"


@contextlib.contextmanager
def running(kind, tmp_path, allowed_hosts=()):
    """(server, GET path, POST path and body, what the endpoint itself answers) of a real service."""
    if kind == "sandbox":
        backend = get_backend("local", **backend_class("local").one_shot_options())
        server = SandboxService(backend, port=0, token=TOKEN, allowed_hosts=allowed_hosts)
        endpoint = ("/health", "/run", b"{}", 400)  # {} is no ExecRequest: 400 from the endpoint
    elif kind == "serve":
        recorder = TableRecorder(str(tmp_path / "records"), flush_rows=1, flush_seconds=0.05)
        server = ChatServer(load_policy(backend="tiny"), recorder, port=0, tokens={"app": TOKEN},
                            allowed_hosts=allowed_hosts)
        endpoint = ("/v1/models", "/v1/feedback", b'{"interaction_id": "chatcmpl-x", "rating": 1}', 404)
    else:
        server = ReviewServer(str(tmp_path / "run"), port=0, reviewers={"ann": TOKEN},
                              allowed_hosts=allowed_hosts)
        endpoint = ("/api/queue", "/api/review", b'{"attempt_id": "a/0", "score": 1}', 404)
    if kind == "serve":
        server.start()
    else:
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server, endpoint
    finally:
        if kind == "serve":
            server.close()
        else:
            server.shutdown()
            server.server_close()


def ask(port: int, method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"") -> int:
    """The status of one raw request (headers exactly as given, Host included or not)."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers),
             f"Content-Length: {len(body)}", "Connection: close"]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        response.read()
        return response.status


# (name, headers besides the token (HOST/PORT/OTHER filled in), POST only?, status or "reached")
CASES = [
    ("own address", [("Host", "127.0.0.1:PORT")], False, "reached"),
    ("localhost", [("Host", "localhost:PORT")], False, "reached"),
    ("localhost, capitals", [("Host", "LocalHost:PORT")], False, "reached"),
    ("[::1]", [("Host", "[::1]:PORT")], False, "reached"),
    ("foreign host", [("Host", "evil.example:PORT")], False, 403),
    ("rebinding name", [("Host", "localhost.evil.example:PORT")], False, 403),
    ("rebinding to 127.0.0.1", [("Host", "127.0.0.1.nip.io:PORT")], False, 403),
    ("localhost with a dot", [("Host", "localhost.:PORT")], False, 403),
    ("another port", [("Host", "127.0.0.1:OTHER")], False, 403),
    ("no port (80)", [("Host", "localhost")], False, 403),
    ("user in host", [("Host", "a@127.0.0.1:PORT")], False, 403),
    ("missing host", [], False, 400),
    ("two hosts", [("Host", "127.0.0.1:PORT"), ("Host", "evil.example")], False, 400),
    ("own origin", [("Host", "127.0.0.1:PORT"), ("Origin", "http://127.0.0.1:PORT")], False, "reached"),
    ("own origin by name", [("Host", "localhost:PORT"), ("Origin", "http://localhost:PORT")], False, "reached"),
    ("foreign origin", [("Host", "127.0.0.1:PORT"), ("Origin", "https://evil.example")], False, 403),
    ("origin null", [("Host", "127.0.0.1:PORT"), ("Origin", "null")], False, 403),
    ("origin on another port", [("Host", "127.0.0.1:PORT"), ("Origin", "http://localhost:OTHER")], False, 403),
    ("origin with a path", [("Host", "127.0.0.1:PORT"), ("Origin", "http://127.0.0.1:PORT/x")], False, 403),
    ("two origins", [("Host", "127.0.0.1:PORT"), ("Origin", "http://127.0.0.1:PORT"),
                     ("Origin", "https://evil.example")], False, 403),
    ("cross-site fetch", [("Host", "127.0.0.1:PORT"), ("Sec-Fetch-Site", "cross-site")], False, 403),
    ("same-site fetch", [("Host", "127.0.0.1:PORT"), ("Sec-Fetch-Site", "same-site")], False, 403),
    ("same-origin fetch", [("Host", "127.0.0.1:PORT"), ("Sec-Fetch-Site", "same-origin")], False, "reached"),
    ("typed address", [("Host", "127.0.0.1:PORT"), ("Sec-Fetch-Site", "none")], False, "reached"),
    ("text/plain", [("Host", "127.0.0.1:PORT"), ("Content-Type", "text/plain")], True, 415),
    ("form", [("Host", "127.0.0.1:PORT"), ("Content-Type", "application/x-www-form-urlencoded")], True, 415),
    # the header parser flags any multipart type, its parts unseen: refused as a malformed header
    ("multipart", [("Host", "127.0.0.1:PORT"), ("Content-Type", "multipart/form-data; boundary=x")], True, 400),
    ("no content type", [("Host", "127.0.0.1:PORT"), ("Content-Type", None)], True, 415),
    ("json in disguise", [("Host", "127.0.0.1:PORT"), ("Content-Type", "text/plain; application/json")], True, 415),
    ("json, latin-1", [("Host", "127.0.0.1:PORT"), ("Content-Type", "application/json; charset=latin-1")], True, 415),
    ("json, utf-8", [("Host", "127.0.0.1:PORT"), ("Content-Type", "application/json; charset=UTF-8")], True, "reached"),
    ("JSON in capitals", [("Host", "127.0.0.1:PORT"), ("Content-Type", "Application/JSON")], True, "reached"),
    ("the CSRF shape", [("Host", "127.0.0.1:PORT"), ("Origin", "https://evil.example"),
                        ("Sec-Fetch-Site", "cross-site"), ("Content-Type", "text/plain")], True, 403),
    ("the rebinding shape", [("Host", "rebind.evil.example:PORT"), ("Content-Type", "text/plain")], True, 403),
]


def filled(headers, port, method):
    """The case's headers for `port`, with the token and (for a POST, unless the case says) JSON."""
    out = [(k, v.replace("OTHER", str(port + 1)).replace("PORT", str(port))) for k, v in headers
           if v is not None]
    out.append(("Authorization", f"Bearer {TOKEN}"))
    if method == "POST" and not any(k == "Content-Type" for k, _ in headers):
        out.append(("Content-Type", JSON))
    return out


@pytest.mark.parametrize("kind", ["sandbox", "serve", "review"])
def test_only_this_servers_own_clients_are_answered(kind, tmp_path):
    with running(kind, tmp_path) as (server, (get, post, body, handler_status)):
        port = server.server_address[1]
        got, want = {}, {}
        for name, headers, post_only, expected in CASES:
            for method in ("POST",) if post_only else ("GET", "POST"):
                path, data = (post, body) if method == "POST" else (get, b"")
                got[name, method] = ask(port, method, path, filled(headers, port, method), data)
                want[name, method] = (handler_status if method == "POST" else 200) \
                    if expected == "reached" else expected
        assert got == want
    if kind == "serve":  # nothing refused reached the recorder
        assert not (tmp_path / "records" / "tables").exists()
    if kind == "review":
        assert not (tmp_path / "run" / "tables" / "reviews").exists()


def test_a_name_the_user_allows_is_answered_on_any_port_or_its_own(tmp_path):
    with running("review", tmp_path, allowed_hosts=("Review.Example.org", "proxy.test:443")) as (server, _):
        port = server.server_address[1]
        for host, origin, expected in [
                ("review.example.org", "https://review.example.org", 200),
                (f"review.example.org:{port}", f"http://review.example.org:{port}", 200),
                ("proxy.test:443", "https://proxy.test", 200),
                ("proxy.test", "http://proxy.test", 403),  # port 80, not the one allowed
                ("evil.example.org", "https://review.example.org", 403),
                ("review.example.org", "https://evil.example.org", 403)]:
            headers = [("Host", host), ("Origin", origin), ("Authorization", f"Bearer {TOKEN}")]
            assert ask(port, "GET", "/api/queue", headers) == expected, (host, origin)
    with pytest.raises(ValueError, match="allowed-host"):
        ReviewServer(str(tmp_path / "run"), port=0, reviewers={"ann": TOKEN},
                     allowed_hosts=("http://evil.example/",))


def test_the_page_a_person_opens_passes_and_a_page_elsewhere_cannot_frame_or_post(tmp_path):
    """What a browser sends: the typed link (Sec-Fetch-Site: none) loads; the page's own fetches
    (same-origin, JSON) are answered; a form another site posts is refused unread."""
    with running("review", tmp_path) as (server, _):
        port = server.server_address[1]
        typed = [("Host", f"127.0.0.1:{port}"), ("Sec-Fetch-Site", "none"), ("Sec-Fetch-Mode", "navigate")]
        assert ask(port, "GET", f"/?token={TOKEN}", typed) == 200
        linked = [("Host", f"127.0.0.1:{port}"), ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate")]
        assert ask(port, "GET", f"/?token={TOKEN}", linked) == 403
        form = [("Host", f"127.0.0.1:{port}"), ("Origin", "http://evil.example"),
                ("Content-Type", "application/x-www-form-urlencoded")]
        assert ask(port, "POST", f"/api/review?token={TOKEN}", form, b"attempt_id=a%2F0&score=1") == 403
