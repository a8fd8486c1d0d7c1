"""Fixtures shared by the test packages: a private dockerd, and each sandbox backend this machine
can run, plain (`backend`), isolating (`isolating`) and with its pid and network isolation proven
(`verified`), the local backend alone (`local_sandbox`), plus a host process hostile code must
not kill (`sentinel`).

The quick tier (`-m "not slow"`) runs each sandbox backend matrix on `local` only; the whole
suite keeps every backend. No test marks this by hand: `pytest_collection_modifyitems` marks
slow every test case with a parameter whose value names a sandbox backend other than `local`
(SANDBOX_BACKENDS; whatever the parameter or fixture is called: `backend`, `sandbox`, a module's
own list), and every test that needs the private dockerd (`docker_daemon`): docker starts take
seconds per test. `@pytest.mark.quick_on(*backends)` widens the quick set for one test or module
where a second backend is the point of a quick check.

Models are cached for the session, not in the user's ~/.cache (`session_model_cache`): one cache
the session's pytest workers share, so SmolLM2's dequantized copy is made once per session.
Tests of the cache itself set a cache of their own (tests/policy/hf/conftest.py)."""

import os
import subprocess

import pytest

from flywheel.sandbox import ExecRequest, SandboxError, get_backend
from tests.run_configs import tiny_config
from tests.sandbox_service_process import services


@pytest.fixture(scope="session")
def docker_daemon(tmp_path_factory):
    """One private dockerd for the whole session (started, and stopped by PID), or a skip saying why."""
    pytest.importorskip("docker", reason="the Docker SDK is not installed: pip install '.[docker]'")
    from flywheel.sandbox.dockerd import PrivateDockerd
    try:
        daemon = PrivateDockerd.start(tmp_path_factory.mktemp("dockerd"))
    except SandboxError as e:
        pytest.skip(str(e))
    yield daemon
    daemon.stop()
    assert daemon.proc.poll() is not None


@pytest.fixture(scope="session")
def sandbox_service(tmp_path_factory):
    """start(capacity=2, token="...", options="") -> (process, url): a real `flywheel sandbox
    serve` of the local backend on 127.0.0.1, stopped (SIGKILL) at the end of the session."""
    with services() as serve:
        def start(capacity: int = 2, token: str | None = "test-token", options: str = ""):
            flags = ["--capacity", str(capacity), "--sandbox-options", options]
            if token is not None:
                token_file = tmp_path_factory.mktemp("token") / "token"
                token_file.write_text(token)
                flags += ["--token-file", str(token_file)]
            return serve(*flags)

        yield start


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory):
    """The endpoint ("http://127.0.0.1:PORT") of a real `gcp-storage-emulator` serving the
    bucket `runs`, for the session; skipped where the package is missing."""
    import shutil
    import socket
    import time
    exe = shutil.which("gcp-storage-emulator")
    if exe is None:
        pytest.skip("gcp-storage-emulator (test extra) is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([exe, "-d", str(tmp_path_factory.mktemp("gcs")), "start", "--host", "127.0.0.1",
                             "--port", str(port), "--default-bucket", "runs"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    proc.kill()
    proc.wait()


# local-remote: the local warm backend behind a sandbox service on loopback, through `remote`
BACKENDS = ["local", "local-cold", "local-remote", "unsafe-subprocess", "docker", "docker-runsc"]
# Parameter values that name a sandbox backend, in this fixture or any module's own matrix.
SANDBOX_BACKENDS = frozenset(BACKENDS)
QUICK_BACKENDS = ("local",)


def pytest_collection_modifyitems(config, items):
    """The quick tier's backend rule (module docstring): a case on a sandbox backend outside its
    quick set, or one needing the private dockerd, is slow. Runs before -m deselects: conftest
    hooks come before the mark plugin's."""
    for item in items:
        if "docker_daemon" in getattr(item, "fixturenames", ()) or _off_quick_backend(item):
            item.add_marker(pytest.mark.slow)


def _off_quick_backend(item) -> bool:
    """Whether one of the item's parameters names a sandbox backend outside its quick set."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    named = {v for v in params.values() if isinstance(v, str) and v in SANDBOX_BACKENDS}
    quick = item.get_closest_marker("quick_on")
    return bool(named - set(quick.args if quick else QUICK_BACKENDS))


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request):
    name = request.param
    try:
        if name.startswith("docker"):
            daemon = request.getfixturevalue("docker_daemon")
            runtime = "runsc" if name == "docker-runsc" else None
            instance = daemon.backend(runtime=runtime)
        elif name == "local-remote":
            _, url = request.getfixturevalue("sandbox_service")(capacity=4)
            instance = get_backend("remote", urls=url, token="test-token")
        else:
            instance = get_backend(name.replace("-cold", ""), **({"warm": False} if "cold" in name else {}))
    except SandboxError as e:
        pytest.skip(f"{name} cannot run here: {e}")
    instance.label = name
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def local_sandbox():
    """The local backend alone (warm), for a module that needs one sandbox, not the matrix; a
    skip saying why where it cannot run."""
    try:
        with get_backend("local") as instance:
            yield instance
    except SandboxError as e:
        pytest.skip(f"local cannot run here: {e}")


@pytest.fixture(scope="module")
def isolating(backend):
    if backend.label == "unsafe-subprocess":
        pytest.skip("unsafe-subprocess isolates nothing by design (debugging only)")
    return backend


@pytest.fixture(scope="module")
def verified(isolating):
    """The backend, once its own pid namespace and network (only `lo`) are proven: the code is pid
    1 (warm) or 2 (cold, under bwrap's init), its parent that init or outside its namespace (0);
    under docker a few more: docker-init is pid 1, the entry shell and its `cp` follow, and before
    them the threads of `runc init` (a Go program) take pids of the same namespace, as many as its
    scheduler started (the code was seen at pid 8, 9 and 10; at 4 under runsc), so docker's bound
    is the first 64 pids of a fresh namespace."""
    code = ("import os; print(os.getpid(), os.getppid()); "
            "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]))")
    result = isolating.run(ExecRequest({}, ("python", "-c", code)))
    pids, interfaces = result.stdout.splitlines()
    pid, ppid = map(int, pids.split())
    local = isolating.label.startswith("local")
    assert pid in ((1, 2) if local else range(1, 64)), result
    assert ppid in ((0, 1) if local else range(1, pid)) and interfaces == "['lo']", result
    return isolating


@pytest.fixture(scope="session", autouse=True)
def session_model_cache(tmp_path_factory):
    """FLYWHEEL_MODEL_CACHE for the session: beside the workers' own temporary folders, so every
    pytest worker of this session shares it (and a later session starts afresh)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "model-cache"
    patch = pytest.MonkeyPatch()
    patch.setenv("FLYWHEEL_MODEL_CACHE", str(root))
    yield root
    patch.undo()


@pytest.fixture(scope="module")
def sentinel():
    """A host process that hostile code must not be able to kill."""
    proc = subprocess.Popen(["sleep", "3600"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def tiny():
    return tiny_config


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium over the DevTools protocol (chromium.py)."""
    from tests.chromium import open_browser
    yield from open_browser(tmp_path)
