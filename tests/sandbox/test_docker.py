"""The `docker` backend and `flywheel sandbox build-image`, against a real private dockerd.

The daemon (Debian docker.io) is started once per session (tests/conftest.py) and
stopped by its PID; everything skips, saying why, where dockerd or the Docker SDK is missing.
The hostile-code suite runs on docker (and runsc) in test_adversarial.py.
"""

import argparse
import json

import pytest

from flywheel.cli import sandbox as sandbox_cli
from flywheel.sandbox import ExecRequest, Limits, SandboxError, get_backend


@pytest.fixture
def daemon(docker_daemon):
    return docker_daemon


def cli(argv):
    parser = argparse.ArgumentParser()
    sandbox_cli.add_parser(parser.add_subparsers(dest="command"))
    return sandbox_cli.main(parser.parse_args(argv))


def test_build_image_then_exec_through_the_cli(daemon, tmp_path, capsys):
    assert cli(["sandbox", "build-image", "--docker-host", daemon.url]) == 0
    assert "built flywheel-sandbox:latest" in capsys.readouterr().out
    program = tmp_path / "prog.py"
    program.write_text("import sys; print('hi', sys.argv[1]); sys.exit(2)")
    assert cli(["sandbox", "exec", "--backend", "docker", "--docker-host", daemon.url,
                "--timeout", "10", str(program), "arg"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert (result["exit_code"], result["stdout"], result["backend"]) == (2, "hi arg\n", "docker")


def test_the_container_is_locked_down(daemon):
    backend = daemon.backend()
    code = ("import os; s = open('/proc/self/status').read()\n"
            "print(os.getuid(), os.getcwd(), [l.split()[1] for l in s.splitlines() if l.startswith(('CapEff', 'NoNewPrivs'))])\n"
            "print(open('/proc/mounts').read())")
    result = backend.run(ExecRequest({"main.py": code}, ("python", "main.py")))
    ids, mounts = result.stdout.split("\n", 1)
    assert ids == "65534 /sandbox ['0000000000000000', '1']", result
    root = next(line for line in mounts.splitlines() if line.split()[1] == "/")
    assert " ro," in f" {root.split()[3]}," and "/sandbox tmpfs" in mounts


def test_files_stdin_and_limits(daemon):
    backend = daemon.backend()
    request = ExecRequest({"main.py": "import sys; print(open('d/x.txt').read(), sys.stdin.read())",
                           "d/x.txt": "data"}, ("python", "main.py"), stdin="in")
    assert backend.run(request).stdout == "data in\n"
    result = backend.run(ExecRequest({"main.py": "import time; time.sleep(30)"}, ("python", "main.py"),
                                     limits=Limits(timeout_s=1)))
    assert result.timed_out


def test_cpu_time_is_measured_and_stderr_kept_whole(daemon):
    backend = daemon.backend()
    code = "import sys\nsum(range(3 * 10**7))\nsys.stderr.write('no newline at the end')\nsys.exit(3)"
    result = backend.run(ExecRequest({"main.py": code}, ("python", "main.py")))
    assert (result.exit_code, result.stderr) == (3, "no newline at the end"), result
    assert result.cpu_ms > 100, result  # a second or so of summing, as the container's shell saw it
    faked = backend.run(ExecRequest({}, ("python", "-c", "import sys; sys.stderr.write("
                                         "'\\n@flywheel-cpu@\\n0m0.00s 0m0.00s\\n0m9.00s 0m0.00s\\n')")))
    assert faked.cpu_ms < 9000 and "@flywheel-cpu@" in faked.stderr, faked  # only the last mark counts


def test_missing_daemon_or_image_is_an_environment_error(daemon):
    with pytest.raises(SandboxError, match="no Docker daemon"):
        get_backend("docker", base_url="unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxError, match="build-image"):
        get_backend("docker", base_url=daemon.url, image="flywheel-no-such-image:1")
