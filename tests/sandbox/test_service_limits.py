"""The sandbox service authenticates first and bounds everything (sandbox/service.py,
service_limits.py, service_token.py), against real `flywheel sandbox serve` processes of the
local backend on 127.0.0.1, spoken to with raw sockets.

Each class of abuse is swept, not sampled: every method and path without a valid token; every
malformed framing (negative, non-decimal, duplicated, chunked, too large, missing); slow headers,
slow bodies, idle connections; connections past the cap. "Did not read the body" is proven by
sending headers that announce a body and never sending it: a server that tried to read it would
sit until its read timeout (60 s here), well past the client's patience (30 s). Times are bounds
that prove "did not hang", never performance; they are wide because the suite shares 2 cores.
"""

import http.client
import itertools
import json
import os
import select
import socket
import subprocess
import threading
import time

import pytest

from flywheel.sandbox import ExecRequest, SandboxError, get_backend
from flywheel.web.service_limits import MAX_BODY
from flywheel.web.service_token import check_exposure, is_loopback, read_token
from tests.sandbox_service_process import SERVE, services

TOKEN = "test-token"
AUTH = f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"  # what the remote client sends
PATIENCE = 30.0  # the client's; the patient service waits 60 s for a body it expects
PRINT = ExecRequest({"m.py": "print(6 * 7)"}, ("python", "m.py"))


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    """serve(*flags) -> port of a real `flywheel sandbox serve` (token TOKEN), killed at the end."""
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    with services() as started:
        def start(*flags: str) -> int:
            _, url = started("--token-file", str(token_file),
                             "--allowed-host", "x", *flags)  # the raw requests say Host: x
            return int(url.rsplit(":", 1)[1])

        yield start


@pytest.fixture(scope="module")
def patient(serve):
    """60 s to read a request, twice the client's patience: a read it should not make shows."""
    return serve("--capacity", "2", "--read-timeout", "60")


@pytest.fixture(scope="module")
def impatient(serve):
    """One second to start a request on an idle connection, one to send its headers."""
    return serve("--capacity", "2", "--idle-timeout", "1", "--read-timeout", "1")


def closed(sock: socket.socket, within: float = PATIENCE) -> bool:
    """Whether the server closes `sock` (EOF or reset) within `within` seconds, sending nothing more."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def ask(port: int, data: bytes) -> tuple[int, dict, bool]:
    """(status, JSON body, whether the server then closed the connection) for raw request bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = response.read()
        try:
            answer = json.loads(body) if body else {}
        except ValueError:  # http.server's own HTML errors (414, 431)
            answer = {"html": body[:200]}
        return response.status, answer, closed(sock)


def request(method: str, path: str, headers: str = "", version: str = "HTTP/1.1", body: bytes = b"") -> bytes:
    return f"{method} {path} {version}\r\nHost: x\r\n{headers}\r\n".encode() + body


def health(port: int) -> dict:
    status, body, _ = ask(port, request("GET", "/health", AUTH + "Connection: close\r\n"))
    assert status == 200, body
    return body


BAD_AUTH = ["", "Authorization: Bearer wrong\r\n", "Authorization: Bearer \r\n",
            "Authorization: Bearer\r\n", f"Authorization: Basic {TOKEN}\r\n",
            f"Authorization: Bearer {TOKEN}x\r\n", f"Authorization: bearer{TOKEN}\r\n",
            f"Authorization: Bearer wrong\r\n{AUTH}", f"{AUTH}{AUTH}"]  # two headers: never guessed
BODY_SHAPES = ["Content-Length: 1000000000\r\n", "Content-Length: -1\r\n", "Content-Length: abc\r\n",
               "Transfer-Encoding: chunked\r\n", "Content-Length : 1000000000\r\n", ""]


@pytest.mark.parametrize("method", ["POST", "GET", "PUT", "DELETE", "HEAD", "BREW"])
def test_without_the_token_every_request_is_refused_before_its_body(patient, method):
    """Every path (known, unknown, odd), both HTTP versions, every body framing: 401 from the
    headers alone, and the connection closed, the announced body never sent nor waited for."""
    for path, version, auth, shape in itertools.product(
            ["/run", "/health", "/nope", "/run?x=1", "//run", "*"], ["HTTP/1.1", "HTTP/1.0"],
            BAD_AUTH, BODY_SHAPES):
        status, body, was_closed = ask(patient, request(method, path, auth + shape, version))
        assert (status, was_closed) == (401, True), (method, path, version, auth, shape, body)
        assert "token" in body.get("error", "") or method == "HEAD"


FRAMINGS = {  # each is refused, whatever the path, from the headers alone
    "Content-Length: -1\r\n": 400, "Content-Length: abc\r\n": 400, "Content-Length: +5\r\n": 400,
    "Content-Length: 5 5\r\n": 400, "Content-Length: 5,5\r\n": 400, "Content-Length: 0x10\r\n": 400,
    "Content-Length: 1e3\r\n": 400, "Content-Length: \r\n": 400, "Content-Length: 5_0\r\n": 400,
    "Content-Length: \u0665\r\n": 400, "Content-Length: 99999999999999999999\r\n": 400,
    "Content-Length: 5\r\nContent-Length: 5\r\n": 400, "Content-Length: 5\r\nContent-Length: 6\r\n": 400,
    "Transfer-Encoding: chunked\r\n": 411, "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n": 411,
    "Transfer-Encoding: identity\r\n": 411, "Content-Length: 5\r\nTransfer-Encoding: gzip, chunked\r\n": 411,
    "Content-Length : 5\r\n": 400, "Content-Length\t: 5\r\n": 400, "X-A: a\r\n Content-Length: 5\r\n": 400,
    "Content-Length: 5\r\nno colon here\r\n": 400, "X-A: a\r\n\tfolded\r\n": 400,  # dropped or merged lines
}


@pytest.mark.parametrize("method, path", [("POST", "/run"), ("POST", "/nope"), ("GET", "/health"),
                                          ("PUT", "/run"), ("BREW", "/")])
def test_a_malformed_length_is_refused_at_once_and_closes(patient, method, path):
    for framing, expected in FRAMINGS.items():
        status, body, was_closed = ask(patient, request(method, path, AUTH + framing))
        assert (status, was_closed) == (expected, True), (method, path, framing, body)


@pytest.mark.parametrize("raw, expected", [
    (request("POST", "/run", AUTH), 411),                                     # no length at all
    (request("POST", "/run", AUTH + f"Content-Length: {MAX_BODY + 1}\r\n"), 413),
    (request("POST", "/run", AUTH + f"Content-Length: {10 ** 17}\r\n"), 413),
    (request("POST", "/nope", AUTH + "Content-Length: 1000000000\r\n"), 404),  # a body nobody reads
    (request("GET", "/run", AUTH + "Content-Length: 1000000000\r\n"), 405),
    (request("POST", "/health", AUTH + "Content-Length: 1000000000\r\n"), 405),
    (request("GET", "/health", AUTH + "Content-Length: 1000000000\r\n"), 400),  # GET takes none
    (request("BREW", "/run", AUTH), 405),
    (request("GET", "/nope", AUTH), 404),
    (request("GET", "/health", AUTH + "X-Flood: a\r\n" * 101), 431),  # header floods: by count,
    (request("GET", "/health", AUTH + "X-Flood: " + "a" * 70000 + "\r\n"), 431),  # by line,
    (request("GET", "/" + "a" * 70000, AUTH), 414),  # and by request line
])
def test_a_request_the_service_will_not_serve_is_answered_unread_and_closed(patient, raw, expected):
    status, body, was_closed = ask(patient, raw)
    assert (status, was_closed) == (expected, True), body


def test_http_0_9_gets_nothing_but_a_closed_connection(patient):
    with socket.create_connection(("127.0.0.1", patient), timeout=PATIENCE) as sock:
        sock.sendall(b"GET /health\r\n\r\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert b'"status"' not in data and b"Host header" in data  # a request without a Host: refused


def read_response(reader) -> tuple[int, dict, dict]:
    """(status, headers, JSON body) of one response from a connection's buffered reader, which
    stays open for the next (http.client.HTTPResponse closes it)."""
    status = int(reader.readline().split()[1])
    headers = http.client.parse_headers(reader)
    return status, headers, json.loads(reader.read(int(headers["Content-Length"])))


def test_well_behaved_clients_keep_alive_and_continue(patient):
    """Keep-alive serves request after request on one connection; `Expect: 100-continue` gets its
    100 only once the token and length passed, and never without the token."""
    run = json.dumps({"files": {"m.py": "print(6 * 7)"}, "command": ["python", "m.py"]}).encode()
    post = request("POST", "/run", AUTH + f"Content-Length: {len(run)}\r\n", body=run)
    with socket.create_connection(("127.0.0.1", patient), timeout=PATIENCE) as sock:
        reader = sock.makefile("rb")
        for raw in [request("GET", "/health", AUTH), post, post, request("GET", "/health", AUTH)]:
            sock.sendall(raw)
            status, headers, body = read_response(reader)
            assert status == 200 and "Connection" not in headers, body
            assert body.get("stdout", "42\n") == "42\n" and body.get("status", "ok") == "ok", body
        sock.sendall(request("POST", "/run", AUTH + f"Content-Length: {len(run)}\r\nExpect: 100-continue\r\n"))
        assert reader.readline().startswith(b"HTTP/1.1 100")
        assert reader.readline() == b"\r\n"
        sock.sendall(run)
        status, _, body = read_response(reader)
        assert status == 200 and body["stdout"] == "42\n"
        sock.sendall(post + request("GET", "/health", AUTH))  # pipelined
        assert read_response(reader)[2]["stdout"] == "42\n" and read_response(reader)[2]["status"] == "ok"
    status, _, was_closed = ask(patient, request("POST", "/run", f"Content-Length: {len(run)}\r\n"
                                                 "Expect: 100-continue\r\n"))
    assert (status, was_closed) == (401, True)  # ask() parses the first status line: not a 100


def drip_until_closed(port: int, head: bytes, drip: bytes, every: float = 0.2, within: float = PATIENCE) -> bool:
    """Send `head`, then `drip` one byte every `every` s (each byte restarts any per-read timeout);
    whether the server closes the connection within `within` s."""
    with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
        sock.sendall(head)
        start = time.monotonic()
        for byte in itertools.cycle(drip):
            if time.monotonic() - start > within:
                return False
            try:
                sock.send(bytes([byte]))
            except OSError:
                return True
            if select.select([sock], [], [], every)[0]:
                try:
                    if sock.recv(65536) == b"":
                        return True
                except ConnectionResetError:
                    return True
    return False


@pytest.mark.slow  # 2-4 s of waiting out a deadline or a flood; the quick tier keeps the token and framing sweeps
def test_slow_headers_are_cut_off_by_a_deadline(impatient):
    assert drip_until_closed(impatient, b"GET /health HTTP/1.1\r\n", b"X-Slow: " + b"a" * 1000)
    assert drip_until_closed(impatient, b"", b"POST /run HTTP/1.1\r\n" + AUTH.encode())
    assert health(impatient)["status"] == "ok"


def test_a_slow_body_is_cut_off_by_a_deadline(impatient):
    head = request("POST", "/run", AUTH + "Content-Length: 100000\r\n")
    assert drip_until_closed(impatient, head, b'{"files": {}, "command": ["python", "-c", "' + b"1" * 99000)


@pytest.mark.slow  # 2-4 s of waiting out a deadline or a flood; the quick tier keeps the token and framing sweeps
def test_idle_connections_are_closed(impatient):
    with socket.create_connection(("127.0.0.1", impatient), timeout=PATIENCE) as sock:
        assert closed(sock), "a connection that never sent a byte stayed open"
    with socket.create_connection(("127.0.0.1", impatient), timeout=PATIENCE) as sock:
        sock.sendall(request("GET", "/health", AUTH))
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 200 and response.getheader("Connection") is None  # kept alive
        response.read()
        assert closed(sock), "an idle kept-alive connection stayed open"


@pytest.mark.slow  # 2-4 s of waiting out a deadline or a flood; the quick tier keeps the token and framing sweeps
def test_remote_reopens_a_connection_the_service_idled_out(impatient):
    """retries=0: the reopen is the client's reflex for a reused connection, not a retry."""
    with get_backend("remote", urls=f"http://127.0.0.1:{impatient}", token=TOKEN, retries=0) as remote:
        assert remote.run(PRINT).stdout == "42\n"
        time.sleep(2.5)  # past the idle timeout: the service has closed the kept-alive connection
        assert remote.run(PRINT).stdout == "42\n"


@pytest.mark.slow  # 2-4 s of waiting out a deadline or a flood; the quick tier keeps the token and framing sweeps
def test_connections_past_the_cap_are_refused_and_the_service_recovers(serve):
    port = serve("--capacity", "2", "--max-connections", "3")
    held = []
    for k in range(3):  # each one proven held: it has been served and is kept alive
        sock = socket.create_connection(("127.0.0.1", port), timeout=PATIENCE)
        sock.sendall(request("GET", "/health", AUTH))
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert json.loads(response.read())["connections"] == k + 1
        held.append(sock)
    for _ in range(20):  # refused at once, from the accepting thread, with no thread of their own
        with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert (response.status, json.loads(response.read())) == (503, {"error": "too many connections"})
            assert closed(sock)
    for sock in held:
        sock.close()
    deadline = time.monotonic() + PATIENCE
    while ask(port, request("GET", "/health", AUTH + "Connection: close\r\n"))[0] != 200:
        assert time.monotonic() < deadline, "the held connections' slots never came back"
        time.sleep(0.1)
    with get_backend("remote", urls=f"http://127.0.0.1:{port}", token=TOKEN) as remote:
        assert remote.run(PRINT).stdout == "42\n"


@pytest.mark.slow  # 2-4 s of waiting out a deadline or a flood; the quick tier keeps the token and framing sweeps
def test_a_bounded_flood_leaves_the_service_whole(serve):
    """24 clients x 12 requests, well-behaved and not, past the connection cap (8): every answer
    is one the class allows, no slot leaks, and the service then serves as before."""
    port = serve("--capacity", "2", "--max-connections", "8", "--idle-timeout", "1", "--read-timeout", "1")
    run = json.dumps({"files": {}, "command": ["python", "-c", "print(1)"]}).encode()
    mixes = [request("GET", "/health", AUTH + "Connection: close\r\n"),
             request("POST", "/run", AUTH + f"Content-Length: {len(run)}\r\nConnection: close\r\n", body=run),
             request("POST", "/run", "Content-Length: 1000000000\r\n"),
             request("POST", "/run", AUTH + "Content-Length: -1\r\n"),
             request("GET", "/x", AUTH + "Transfer-Encoding: chunked\r\n"),
             b"GET /health HTTP/1.1\r\n" + b"X-Flood: a\r\n" * 200 + b"\r\n",  # over http.server's 100
             b"",  # connect, say nothing, leave
             b"POST /run HTTP/1.1\r\n"]  # start, then leave mid-headers
    allowed = {200, 400, 401, 411, 431, 503}
    seen, bad = [], []

    def client(i):
        for raw in itertools.islice(itertools.cycle(mixes), i, i + 12):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as sock:
                    sock.sendall(raw)
                    if raw in (b"", mixes[-1]):
                        continue
                    response = http.client.HTTPResponse(sock)
                    response.begin()
                    response.read()
                    seen.append(response.status)
                    if response.status not in allowed:
                        bad.append((raw[:60], response.status))
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                seen.append("reset")  # past the cap while its request was still being sent
            except Exception as e:  # noqa: BLE001 (a hang or a garbled reply: the test's failure)
                bad.append((raw[:60], repr(e)))
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a client hung"
    assert not bad, bad
    assert 200 in seen and 401 in seen, seen
    # Only the asking connection left. Read once per try: the last try's own connection may still
    # be closing, so asking again right after can count two.
    deadline, last = time.monotonic() + PATIENCE, health(port)
    while last["connections"] != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        last = health(port)
    assert last["connections"] == 1, (last, seen)
    with get_backend("remote", urls=f"http://127.0.0.1:{port}", token=TOKEN) as remote:
        assert remote.run(PRINT).stdout == "42\n"


def refused_to_serve(*flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "FLYWHEEL_SANDBOX_TOKEN"} | (env or {})
    return subprocess.run([*SERVE, "--port", "0", *flags], capture_output=True, text=True, timeout=60, env=environ)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "10.1.2.3", "example.com", "127.0.0.1.nip.io"])
def test_listening_beyond_loopback_without_a_token_is_refused(host):
    out = refused_to_serve("--host", host)
    assert out.returncode == 2 and "refusing to listen" in out.stderr and "serving" not in out.stdout, out
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("text", ["", "\n", "   \t\n", "two words", "caf\u00e9", "a\x00b"])
def test_an_empty_or_unsendable_token_is_refused_at_startup(tmp_path, text):
    token_file = tmp_path / "token"
    token_file.write_text(text)
    for flags, env in [(("--token-file", str(token_file)), None), ((), {"FLYWHEEL_SANDBOX_TOKEN": text})]:
        if "\x00" in text and env:
            continue  # an environment cannot hold NUL
        out = refused_to_serve(*flags, env=env)
        assert out.returncode == 2 and "token" in out.stderr and "serving" not in out.stdout, out
    with pytest.raises(SandboxError, match="token"):  # the client applies the same rule
        get_backend("remote", urls="http://127.0.0.1:9", token_file=str(token_file))


def test_what_counts_as_loopback():
    assert all(is_loopback(h) for h in ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"])
    assert not any(is_loopback(h) for h in ["0.0.0.0", "::", "", "10.0.0.1", "localhost.example", "::ffff:10.0.0.1"])
    check_exposure("127.0.0.1", None)
    check_exposure("0.0.0.0", "a-token")
    assert read_token(token="  spaced-out  ") == "spaced-out"
