"""The sandbox contract and the `local` backend, with real subprocesses (no mocks).

Nothing here may need a pid namespace to be safe: no fork bombs, no kill(-1).
"""

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from flywheel.transforms.sandbox import (
    ExecRequest, ExecResult, Limits, SandboxBackend, SandboxError, available_backends, get_backend,
    register_backend)

IS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def sandbox():
    with get_backend("local") as backend:
        yield backend


def run(sandbox, code: str, files=None, **kwargs) -> ExecResult:
    return sandbox.run(ExecRequest({"main.py": code, **(files or {})}, ("python", "main.py"), **kwargs))


def alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.split()[1] in ("Z", "X") for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return False


def test_exit_code_and_both_streams(sandbox):
    result = run(sandbox, "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.kill_reason is None and not result.timed_out and not result.truncated
    assert result.backend == "local" and result.wall_ms > 0 and result.cpu_ms > 0
    assert set(result.to_dict()) == {f for f in ExecResult.__dataclass_fields__}


def test_stdin_is_delivered_then_closed(sandbox):
    result = run(sandbox, "import sys; data = sys.stdin.read(); print(len(data), data[:5])",
                 stdin="hello" * 100_000)  # larger than a pipe buffer
    assert result.stdout == "500000 hello\n"


def test_files_are_visible_and_the_work_dir_is_removed(sandbox):
    code = "import os; print(os.getcwd()); print(open('data/in.txt').read())"
    result = run(sandbox, code, files={"data/in.txt": "payload"})
    workdir, content = result.stdout.splitlines()
    assert content == "payload"
    assert not os.path.exists(workdir)


def test_code_can_write_files_in_its_work_dir(sandbox):
    code = ("open('out.txt', 'w').write('new'); open('given.txt', 'a').write('+');"
            "print(open('out.txt').read(), open('given.txt').read())")
    result = run(sandbox, code, files={"given.txt": "old"})
    assert result.stdout == "new old+\n", result.stderr


def test_work_dir_does_not_shadow_the_standard_library(sandbox):
    result = run(sandbox, "import json; print(json.dumps(1))", files={"json.py": "raise SystemExit(7)"})
    assert (result.exit_code, result.stdout) == (0, "1\n")


@pytest.mark.parametrize("code", ["while True: pass", "import time; time.sleep(60)",
                                  "import time\nwhile True: print(1, flush=True); time.sleep(0.01)"])
def test_wall_timeout_kills(sandbox, code):
    start = time.monotonic()
    result = run(sandbox, code, limits=Limits(timeout_s=1.5))  # cpu limit ceil(1.5) = 2 s comes later
    assert result.timed_out and result.kill_reason == "timeout"
    assert result.exit_code == -signal.SIGKILL
    assert 1.4 < time.monotonic() - start < 3.0


def test_cpu_limit_kills_a_busy_loop(sandbox):
    result = run(sandbox, "while True: pass", limits=Limits(timeout_s=10, cpu_s=1))
    assert result.kill_reason == "cpu" and not result.timed_out
    assert result.wall_ms < 3000


def test_background_children_do_not_survive_the_run(sandbox):
    code = ("import subprocess; a = subprocess.Popen(['sleep', '60']);"
            "b = subprocess.Popen(['sleep', '60'], start_new_session=True); print(a.pid, b.pid)")
    result = run(sandbox, code)
    assert result.exit_code == 0 and result.wall_ms < 3000, result  # not held open until the timeout
    in_group, escaped = map(int, result.stdout.split())
    assert not alive(in_group)
    if IS_ROOT:  # left the process group with setsid, but not its uid
        assert not alive(escaped)
    else:
        os.kill(escaped, signal.SIGKILL)  # no uid of its own to find it by: the bwrap backend's job


def test_output_cap_stops_a_flood_quickly(sandbox):
    result = run(sandbox, "for _ in range(50_000): print('x' * 1000)")  # 50 MB
    assert result.truncated and result.kill_reason == "output"
    assert len(result.stdout) == Limits().output_bytes
    assert result.wall_ms < 2000


def test_memory_limit(sandbox):
    result = run(sandbox, "x = bytearray(2 * 1024**3)")
    assert result.exit_code == 1 and "MemoryError" in result.stderr
    assert result.kill_reason == "memory"


def test_process_limit(sandbox):
    code = "import threading, time\nfor _ in range(8): threading.Thread(target=time.sleep, args=(1,)).start()"
    result = run(sandbox, code, limits=Limits(processes=4))
    assert result.exit_code != 0 and result.kill_reason == "processes", result.stderr


def test_parent_environment_is_invisible(sandbox, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_TEST_SECRET", "hunter2")
    result = run(sandbox, "import os; print(sorted(os.environ.items()))")
    assert "hunter2" not in result.stdout
    assert "'PATH', '/usr/bin:/bin'" in result.stdout and "HOME" in result.stdout


@pytest.mark.skipif(not IS_ROOT, reason="only a root host user is dropped to a sandbox uid")
def test_root_is_dropped(sandbox):
    result = run(sandbox, "import os; print(os.getuid(), os.getgid(), os.getgroups())")
    uid, gid, groups = result.stdout.split(maxsplit=2)
    assert uid != "0" and gid != "0" and groups.strip() == "[]"


def test_child_cannot_gain_privileges(sandbox):
    result = run(sandbox, "print(open('/proc/self/status').read())")
    status = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert status["NoNewPrivs"].strip() == "1"  # setuid binaries (su, sudo) grant nothing
    assert int(status["CapEff"], 16) == 0


def test_concurrent_runs_each_get_their_own_uid(sandbox):
    request = ExecRequest({}, ("python", "-c", "import os, time; time.sleep(0.5); print(os.getuid())"))
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(sandbox.run, [request] * 8))
    assert all(r.exit_code == 0 for r in results), [r.stderr for r in results]
    if IS_ROOT:
        assert len({r.stdout for r in results}) == 8


@pytest.mark.parametrize("path", ["../escape.py", "/etc/escape.py", "a/../../escape.py", ""])
def test_paths_escaping_the_work_dir_are_rejected(path):
    with pytest.raises(ValueError, match="escapes"):  # when the request is built, for any backend
        ExecRequest({path: "x"}, ("python", "-c", "pass"))


def test_other_commands_and_files_of_the_work_dir(sandbox):
    result = sandbox.run(ExecRequest({"run.sh": "echo $HOME | grep -c flywheel-sandbox"}, ("sh", "run.sh")))
    assert (result.exit_code, result.stdout) == (0, "1\n")


def test_sandbox_failures_raise_sandbox_error(sandbox):
    with pytest.raises(SandboxError):
        sandbox.run(ExecRequest({}, ("/nonexistent/binary",)))
    with pytest.raises(SandboxError, match="no Python interpreter"):
        get_backend("local", candidates=("/nonexistent/python",))


def test_registry():
    assert "local" in available_backends()
    with pytest.raises(ValueError, match="local"):
        get_backend("no-such-backend")

    with pytest.raises(ValueError, match="already registered"):
        @register_backend("local")
        class Impostor(SandboxBackend):
            def run(self, request):
                raise AssertionError
