"""Read-only environment mounts (`ExecRequest.mounts`) on the real backends: the mounted dir is
readable, not writable, and nothing else of the host comes with it; backends that cannot mount
refuse with a SandboxError (an environment error)."""

import os
import shutil
import tempfile

import pytest

from flywheel.sandbox import ExecRequest, SandboxError, get_backend
from tests.sandbox.unsupported import assert_refused_where_unsupported

DEST = "/opt/flywheel-env"
PROBE = ("import os\n"
         "print(open('/opt/flywheel-env/pkg/data.txt').read().strip())\n"
         "try:\n"
         "    open('/opt/flywheel-env/new.txt', 'w')\n"
         "    print('wrote')\n"
         "except OSError as e:\n"
         "    print('refused', e.errno)\n"
         "print(os.path.exists(HOST), sorted(os.listdir('/opt')))\n")


@pytest.fixture
def env_dir():
    """A host dir the sandbox's uid can reach (pytest's tmp_path sits under a 0700 dir)."""
    top = tempfile.mkdtemp(prefix="flywheel-mount-test-")
    os.chmod(top, 0o755)
    os.makedirs(os.path.join(top, "pkg"), mode=0o755)
    with open(os.path.join(top, "pkg", "data.txt"), "w") as f:
        f.write("from the host\n")
    os.chmod(os.path.join(top, "pkg", "data.txt"), 0o644)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def probe(backend, host):
    request = ExecRequest({"main.py": f"HOST = {host!r}\n" + PROBE}, ("python", "main.py"),
                          mounts=((host, DEST),))
    return backend.run(request)


@pytest.mark.parametrize("warm", [True, False])
def test_local_mount_is_readable_read_only_and_alone(env_dir, warm):
    with get_backend("local", warm=warm) as backend:  # warm: a request with mounts runs cold
        result = probe(backend, env_dir)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["from the host", "refused 30", "False ['flywheel-env']"]
    assert not os.path.exists(os.path.join(env_dir, "new.txt"))


def test_without_mounts_opt_is_empty():
    with get_backend("local", warm=False) as backend:
        result = backend.run(ExecRequest({}, ("python", "-c", "import os; print(os.path.exists('/opt'))")))
    assert result.stdout == "False\n"


@pytest.mark.parametrize("mount, why", [
    (("relative/dir", DEST), "absolute"),
    (("/tmp", "/usr/lib/python3"), "below /opt/"),
    (("/tmp", "/opt"), "below /opt/"),
    (("/tmp", "/opt/../usr"), "'..'"),
    (("/tmp/../etc", DEST), "'..'"),
    (("/tmp",), "pair"),
])
def test_bad_mounts_are_refused_where_the_request_is_built(mount, why):
    with pytest.raises(ValueError, match=why):
        ExecRequest({}, ("true",), mounts=(mount,))


def test_a_missing_or_unreachable_host_dir_is_an_environment_error():
    with get_backend("local", warm=False) as backend:
        with pytest.raises(SandboxError, match="not a directory"):
            backend.run(ExecRequest({}, ("true",), mounts=(("/nonexistent-flywheel", DEST),)))
        if os.geteuid() == 0:
            with pytest.raises(SandboxError, match="cannot reach"):
                backend.run(ExecRequest({}, ("true",), mounts=(("/root", DEST),)))


def test_backends_that_cannot_mount_refuse(env_dir):
    assert_refused_where_unsupported(ExecRequest({}, ("true",), mounts=((env_dir, DEST),)), "mounts")


def test_docker_mount(docker_daemon, env_dir):
    result = probe(docker_daemon.backend(), env_dir)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["from the host", "refused 30"]
    assert result.stdout.splitlines()[2].startswith("False")
