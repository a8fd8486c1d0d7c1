"""The sandbox service and the `remote` backend, with real `flywheel sandbox serve` processes on
127.0.0.1 (fixture `sandbox_service`: tests/conftest.py). The adversarial suites run through
`remote` too (the `local-remote` backend of tests/conftest.py)."""

import json
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest

from flywheel.sandbox import ExecRequest, Limits, SandboxError, get_backend
from flywheel.sandbox.wire import dump_request, load_request

SLEEP = ExecRequest({"main.py": "import time\ntime.sleep(1.0)\nprint('slept')"}, ("python", "main.py"))


def post(url, request, token="test-token"):
    """(status, JSON body) of one raw POST /run."""
    http = urllib.request.Request(url + "/run", data=dump_request(request), method="POST",
                                  headers={"Authorization": f"Bearer {token}",
                                           "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(http, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_request_crosses_the_wire_unchanged():
    request = ExecRequest({"a/b.py": "x = '\ud800'\n"}, ("python", "a/b.py"), stdin="é\0",
                          limits=Limits(timeout_s=3, memory_mb=128))
    assert load_request(dump_request(request)) == request
    for bad in (b"{", b'{"files": [], "command": []}', b'{"files": {}, "command": ["x"], "limits": {"nope": 1}}',
                b'{"files": {"../x": ""}, "command": ["x"]}'):
        with pytest.raises(ValueError):
            load_request(bad)


def test_runs_come_back_as_the_backend_reported_them(sandbox_service):
    _, url = sandbox_service(capacity=2)
    with get_backend("remote", urls=url, token="test-token") as remote:
        ok = remote.run(ExecRequest({"m.py": "print(6 * 7)"}, ("python", "m.py")))
        assert (ok.exit_code, ok.stdout, ok.backend) == (0, "42\n", "local")
        slow = remote.run(ExecRequest({"m.py": "while True: pass"}, ("python", "m.py"),
                                      limits=Limits(timeout_s=1)))
        assert slow.kill_reason in ("timeout", "cpu"), slow  # the code's doing: a result, not an error


def test_a_wrong_token_or_a_bad_request_is_refused(sandbox_service):
    _, url = sandbox_service(capacity=1)
    with pytest.raises(SandboxError, match="401"):
        get_backend("remote", urls=url, token="wrong")
    status, body = post(url, SLEEP, token="wrong")
    assert status == 401, body
    http = urllib.request.Request(url + "/run", data=b'{"files": 1}', method="POST",
                                  headers={"Authorization": "Bearer test-token",
                                           "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(http, timeout=10)
    assert refused.value.code == 400 and "malformed" in json.loads(refused.value.read())["error"]


def test_at_capacity_a_run_is_refused_busy_at_once(sandbox_service):
    _, url = sandbox_service(capacity=1)
    first = threading.Thread(target=post, args=(url, SLEEP))
    first.start()
    time.sleep(0.3)
    status, body = post(url, SLEEP)  # while the first one sleeps
    first.join()
    assert (status, body) == (503, {"error": "busy"})


def test_a_server_killed_mid_run_loses_no_attempt(sandbox_service):
    doomed, url_a = sandbox_service(capacity=4)
    _, url_b = sandbox_service(capacity=4)
    results = []
    with get_backend("remote", urls=f"{url_a} {url_b}", token="test-token") as remote:
        threads = [threading.Thread(target=lambda: results.append(remote.run(SLEEP))) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # every attempt is running, half of them on the doomed server
        doomed.kill()
        for t in threads:
            t.join()
    assert [r.stdout for r in results] == ["slept\n"] * 4, results


def test_draining_finishes_runs_in_flight_and_sends_new_ones_elsewhere(sandbox_service):
    draining, url_a = sandbox_service(capacity=2)
    _, url_b = sandbox_service(capacity=2)
    in_flight = []
    thread = threading.Thread(target=lambda: in_flight.append(post(url_a, SLEEP)))
    thread.start()
    time.sleep(0.3)
    draining.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    assert post(url_a, SLEEP) == (503, {"error": "draining"})
    with get_backend("remote", urls=f"{url_a} {url_b}", token="test-token") as remote:
        assert remote.run(ExecRequest({}, ("python", "-c", "print(1)"))).stdout == "1\n"
    thread.join()
    assert in_flight[0][0] == 200 and in_flight[0][1]["stdout"] == "slept\n", in_flight
    assert draining.wait(timeout=10) == 0
