"""The sandbox contract, on every subprocess backend (`local` warm and cold, `unsafe-subprocess`),
with real processes (no mocks).

Nothing here may need a pid namespace to be safe: no fork bombs, no kill(-1) (those are in
test_adversarial.py, behind a verified pid namespace).
"""

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from flywheel.sandbox import (
    ExecRequest, ExecResult, Limits, SandboxBackend, SandboxError, available_backends, get_backend,
    register_backend)

IS_ROOT = os.geteuid() == 0


BACKENDS = {"local": dict(name="local"), "local-cold": dict(name="local", warm=False),
            "unsafe-subprocess": dict(name="unsafe-subprocess")}


@pytest.fixture(scope="module", params=list(BACKENDS))
def sandbox(request):
    with get_backend(**BACKENDS[request.param]) as backend:
        yield backend


def marked_sleep(tag: str, seconds: float) -> str:
    """Code that names its process `fw-<tag>` (its comm, seen from the host) and sleeps."""
    return (f"import ctypes, time; ctypes.CDLL(None).prctl(15, b'fw-{tag}', 0, 0, 0);"
            f"time.sleep({seconds})")


def host_uids(tag: str) -> list[int]:
    """Host uids of the processes named `fw-<tag>`: the host's view, whatever the namespaces say."""
    uids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/comm").read().strip() == f"fw-{tag}":
                status = open(f"/proc/{pid}/status").read()
                uids.append(int(status.split("Uid:")[1].split()[0]))
        except (OSError, IndexError):
            continue
    return uids


def uids_while_running(sandbox, requests, tag: str) -> list[int]:
    """Host uids of the runs' processes, once all of them are up at the same time."""
    with ThreadPoolExecutor(len(requests)) as pool:
        futures = [pool.submit(sandbox.run, r) for r in requests]
        deadline, uids = time.monotonic() + 20, []
        while len(uids) < len(requests) and time.monotonic() < deadline:
            time.sleep(0.1)  # warm servers start one by one: under load, seconds for eight
            uids = host_uids(tag)
        results = [f.result() for f in futures]
    assert all(r.exit_code == 0 for r in results), [r.stderr for r in results]
    return uids


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
    assert result.backend == sandbox.name and result.wall_ms > 0 and result.cpu_ms > 0
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
    assert time.monotonic() - start > 1.4  # not before its time; the kill reason says by what


def test_cpu_limit_kills_a_busy_loop(sandbox):
    result = run(sandbox, "while True: pass", limits=Limits(timeout_s=10, cpu_s=1))
    assert result.kill_reason == "cpu" and not result.timed_out  # the CPU limit, long before the wall clock


def test_background_children_do_not_survive_the_run(sandbox):
    code = ("import subprocess; a = subprocess.Popen(['sleep', '60']);"
            "b = subprocess.Popen(['sleep', '60'], start_new_session=True); print(a.pid, b.pid)")
    result = run(sandbox, code)
    assert result.exit_code == 0 and not result.timed_out, result  # not held open until the timeout
    in_group, escaped = map(int, result.stdout.split())
    if sandbox.name == "local":  # pids of its own namespace: gone with it, nothing to look for
        return
    assert not alive(in_group)
    if IS_ROOT:  # left the process group with setsid, but not its uid
        assert not alive(escaped)
    else:
        os.kill(escaped, signal.SIGKILL)  # no uid of its own to find it by: `local`'s job


def test_output_cap_stops_a_flood_quickly(sandbox):
    result = run(sandbox, "for _ in range(50_000): print('x' * 1000)")  # 50 MB
    assert result.truncated and result.kill_reason == "output"
    assert len(result.stdout) == Limits().output_bytes and not result.timed_out


def test_memory_limit(sandbox):
    """RLIMIT_AS refuses the allocation: the code's own exception, not a kill (exit_status.py)."""
    result = run(sandbox, "x = bytearray(2 * 1024**3)")
    assert result.exit_code == 1 and "MemoryError" in result.stderr
    assert result.kill_reason is None


def test_process_limit(sandbox):
    """The limit refuses the thread: the code's own exception, not a kill (exit_status.py)."""
    code = "import threading, time\nfor _ in range(8): threading.Thread(target=time.sleep, args=(1,)).start()"
    result = run(sandbox, code, limits=Limits(processes=4))
    assert result.exit_code != 0 and "can't start new thread" in result.stderr
    assert result.kill_reason is None, result


# ---- output that cannot be encoded: every record comes back, decoded safely ----

def assert_storable(result: ExecResult) -> None:
    """Every text of the result encodes as strict UTF-8 (what Parquet and JSON writers need)."""
    for text in (result.stdout, result.stderr):
        text.encode("utf-8")
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")


def test_invalid_utf8_and_nul_bytes_in_both_streams(sandbox):
    code = ("import os\nos.write(1, b'ok \\xff\\xfe\\x00 \\xed\\xa0\\x80 end\\n')\n"
            "os.write(2, b'\\xc3\\x28 \\x00 \\x80')")
    result = run(sandbox, code)
    assert result.exit_code == 0 and result.kill_reason is None, result
    assert result.stdout == "ok \ufffd\ufffd\x00 \ufffd\ufffd\ufffd end\n"
    assert result.stderr == "\ufffd( \x00 \ufffd"
    assert_storable(result)


def test_printing_a_lone_surrogate_is_the_codes_own_error(sandbox):
    result = run(sandbox, "print('a\\udcff b\\ud800')")
    assert result.exit_code == 1 and "UnicodeEncodeError" in result.stderr, result
    assert_storable(result)


@pytest.mark.parametrize("field", ["stdin", "file"])
def test_lone_surrogates_in_the_request_run_as_invalid_bytes(sandbox, field):
    """Model output may hold lone surrogates; they reach the code as the bytes they stand for,
    and what it makes of them is its own doing: never an exception, never a SandboxError."""
    text = "x = '\udcff \ud800'\n"
    if field == "stdin":
        result = run(sandbox, "import sys; print(sys.stdin.buffer.read())", stdin=text)
        assert result.exit_code == 0 and "\\xed\\xb3\\xbf \\xed\\xa0\\x80" in result.stdout, result
    else:
        result = run(sandbox, text)
        assert result.exit_code == 1 and "SyntaxError" in result.stderr, result
    assert_storable(result)


def test_file_names_the_code_makes_come_back_storable(sandbox):
    code = "import os\nopen(b'\\xff\\xfe.txt', 'w').write('x')\nprint(os.listdir('.'))"
    result = run(sandbox, code)
    assert result.exit_code == 0 and "\\udcff\\udcfe.txt" in result.stdout, result
    assert_storable(result)


@pytest.mark.parametrize("name", ["a\0b.py", "a\udcff.py", "d\ud800/x.py"])
def test_a_file_name_that_cannot_exist_is_an_input_error(name):
    with pytest.raises(ValueError, match="cannot be a file name"):
        ExecRequest({name: "x"}, ("python", name))


# ---- the record rests on the kernel's word: what the code prints or chooses is no kill ----

@pytest.mark.parametrize("status", [152, 137, 128 + signal.SIGSEGV, 1])
def test_an_exit_status_the_code_chose_is_no_limit_kill(sandbox, status):
    result = run(sandbox, f"import sys; sys.exit({status})", limits=Limits(cpu_s=1))
    assert result.kill_reason in (None, "signal") and not result.timed_out, result
    assert result.exit_code in (status, -(status - 128)), result


@pytest.mark.parametrize("claim", ["MemoryError", "Cannot allocate memory", "std::bad_alloc",
                                   "can't start new thread", "BlockingIOError: [Errno 11]"])
def test_a_printed_limit_message_is_no_kill(sandbox, claim):
    result = run(sandbox, f"import sys; print({claim!r}, file=sys.stderr); sys.exit(1)")
    assert (result.exit_code, result.kill_reason) == (1, None), result


def test_parent_environment_is_invisible(sandbox, monkeypatch):
    monkeypatch.setenv("FLYWHEEL_TEST_SECRET", "hunter2")
    result = run(sandbox, "import os; print(sorted(os.environ.items()))")
    assert "hunter2" not in result.stdout
    assert "'PATH', '/usr/bin:/bin'" in result.stdout and "HOME" in result.stdout
    assert "FLYWHEEL_TEST_SECRET" not in result.stdout


@pytest.mark.skipif(not IS_ROOT, reason="only a root host user is dropped to a sandbox uid")
def test_root_is_dropped(sandbox):
    result = run(sandbox, "import os; print(os.getuid(), os.getgid(), os.getgroups())")
    uid, gid, groups = result.stdout.split(maxsplit=2)
    assert uid != "0" and gid != "0" and groups.strip() in ("[]", "[65534]")
    tag = f"root{os.getpid()}"  # and not root on the host either
    request = ExecRequest({}, ("python", "-c", marked_sleep(tag, 2)), limits=Limits(timeout_s=30))
    assert 0 not in uids_while_running(sandbox, [request], tag) != []


def test_child_cannot_gain_privileges(sandbox):
    result = run(sandbox, "print(open('/proc/self/status').read())")
    status = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert status["NoNewPrivs"].strip() == "1"  # setuid binaries (su, sudo) grant nothing
    assert int(status["CapEff"], 16) == 0


def test_concurrent_runs_each_get_their_own_uid(sandbox):
    tag = f"conc{os.getpid()}"
    request = ExecRequest({}, ("python", "-c", marked_sleep(tag, 4)), limits=Limits(timeout_s=30))
    uids = uids_while_running(sandbox, [request] * 8, tag)
    assert len(uids) == 8
    if IS_ROOT:
        assert len(set(uids)) == 8 and 0 not in uids


@pytest.mark.parametrize("path", ["../escape.py", "/etc/escape.py", "a/../../escape.py", ""])
def test_paths_escaping_the_work_dir_are_rejected(path):
    with pytest.raises(ValueError, match="escapes"):  # when the request is built, for any backend
        ExecRequest({path: "x"}, ("python", "-c", "pass"))


def test_other_commands_and_files_of_the_work_dir(sandbox):
    result = sandbox.run(ExecRequest({"run.sh": "echo $HOME; pwd"}, ("sh", "run.sh")))
    home, cwd = result.stdout.split()
    assert result.exit_code == 0 and home == cwd and "sandbox" in cwd


def test_sandbox_failures_raise_sandbox_error(sandbox):
    with pytest.raises(SandboxError):
        sandbox.run(ExecRequest({}, ("/nonexistent/binary",)))
    with pytest.raises(SandboxError, match="no Python interpreter"):
        get_backend(sandbox.name, candidates=("/nonexistent/python",), **(
            {"warm": False} if sandbox.name == "local" else {}))


def test_registry():
    get_backend("unsafe-subprocess").close()  # registered by now, whatever ran before
    assert {"local", "unsafe-subprocess", "docker"} <= set(available_backends())
    with pytest.raises(ValueError, match="local"):
        get_backend("no-such-backend")

    with pytest.raises(ValueError, match="already registered"):
        @register_backend("unsafe-subprocess")
        class Impostor(SandboxBackend):
            def run(self, request):
                raise AssertionError


def test_backends_are_found_by_importing_their_package_and_nothing_else():
    code = ("import json, sys; from flywheel.sandbox.backends import local;"
            "print(json.dumps(list(sys.modules))); from flywheel.sandbox import available_backends;"
            "available_backends(); print(json.dumps(list(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    after_local, after_discovery = map(json.loads, out.stdout.splitlines())
    assert "flywheel.sandbox.backends.unsafe" not in after_local  # importing local registers local
    assert "flywheel.sandbox.backends.unsafe" in after_discovery
    assert not any("inside" in m or "forkserver" in m for m in after_discovery)  # never on the host


def test_a_missing_file_fails_as_cpython_does(sandbox):
    result = sandbox.run(ExecRequest({}, ("python", "missing.py")))
    assert result.exit_code == 2 and "can't open file" in result.stderr


def test_local_is_isolated_and_warm_by_default():
    with get_backend("local") as backend:
        assert backend.warm, "the warm pool did not start here: see the warning logged above"
        result = backend.run(ExecRequest({}, ("python", "-c", "import os; print(os.getpid())")))
        assert result.stdout == "1\n"  # its own pid namespace, of which it is the init


def test_without_namespaces_local_says_so_clearly(monkeypatch):
    import stat
    import tempfile
    from flywheel.sandbox.backends import local
    fake = os.path.join(tempfile.mkdtemp(), "bwrap")  # reachable by a leased uid, as bwrap must be
    os.chmod(os.path.dirname(fake), 0o755)
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    os.chmod(fake, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    monkeypatch.setattr(local, "find_bwrap", lambda: fake)
    with pytest.raises(SandboxError, match="cannot create namespaces.*unsafe-subprocess"):
        get_backend("local")


def test_unsafe_subprocess_warns_on_every_run(caplog):
    with get_backend("unsafe-subprocess") as backend:
        caplog.clear()
        for _ in range(2):
            backend.run(ExecRequest({}, ("python", "-c", "pass")))
    warnings = [r for r in caplog.records if "debugging only" in r.getMessage()]
    assert len(warnings) == 2 and all(r.levelname == "WARNING" for r in warnings)


def test_the_warm_pool_replaces_a_dead_server():
    with get_backend("local", pool_size=1) as backend:
        assert backend.run(ExecRequest({}, ("python", "-c", "print(1)"))).stdout == "1\n"
        server = backend._pool._idle.get()  # the one server, idle
        server.proc.kill()
        server.proc.wait()
        backend._pool._idle.put(server)
        assert backend.run(ExecRequest({}, ("python", "-c", "print(2)"))).stdout == "2\n"
