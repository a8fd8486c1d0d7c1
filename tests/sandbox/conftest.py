"""Fixtures shared by the sandbox test modules."""

import pytest

from flywheel.sandbox import SandboxError


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
