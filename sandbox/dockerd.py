"""A private Docker daemon for tests, CI and benchmarks: its own root, socket and pid file.

    daemon = PrivateDockerd.start("/tmp/d")     # dockerd from Debian's docker.io
    backend = daemon.backend(runtime="runsc")   # image built on first use, no registry
    daemon.stop()                               # SIGTERM, then SIGKILL, by PID

gVisor's runsc, when installed, is registered as runtime `runsc` with `--network=none` (plain
registration fails in the root network namespace) and `--oci-seccomp` (else the container's seccomp
profile is silently ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from flywheel.sandbox.contract import SandboxError


class PrivateDockerd:
    def __init__(self, root: Path, proc: subprocess.Popen):
        self.root, self.proc = root, proc
        self.url = f"unix://{root / 'docker.sock'}"
        self.runtimes = ["runsc"] if shutil.which("runsc") else []

    @classmethod
    def start(cls, root, timeout_s: float = 60) -> "PrivateDockerd":
        """Start dockerd under `root` and wait until it answers; SandboxError says why not."""
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise SandboxError("dockerd is not installed (Debian: apt-get install docker.io)")
        if os.geteuid() != 0:
            raise SandboxError("a private dockerd needs root")
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        args = ["--network=none", "--oci-seccomp"]  # without the latter runsc ignores our profile
        config = {"runtimes": {"runsc": {"path": shutil.which("runsc"), "runtimeArgs": args}}
                  } if shutil.which("runsc") else {}
        (root / "daemon.json").write_text(json.dumps(config))
        log = open(root / "dockerd.log", "wb")
        proc = subprocess.Popen(
            [dockerd, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
             "-H", f"unix://{root / 'docker.sock'}", "--pidfile", str(root / "docker.pid"),
             "--config-file", str(root / "daemon.json"), "--bridge=none", "--iptables=false",
             "--ip6tables=false", "--log-level=warn"],
            stdout=log, stderr=log, start_new_session=True)
        daemon = cls(root, proc)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SandboxError(f"dockerd exited ({proc.returncode}): {daemon.log_tail()}")
            with contextlib.suppress(Exception):
                if daemon.client().ping():
                    return daemon
            time.sleep(0.3)
        daemon.stop()
        raise SandboxError(f"dockerd did not answer in {timeout_s} s: {daemon.log_tail()}")

    def client(self):
        import docker
        return docker.DockerClient(base_url=self.url, version="auto", timeout=120)

    def backend(self, runtime: str | None = None, **kwargs):
        """A `docker` backend on this daemon, building its image first if needed."""
        from flywheel.sandbox.backends.docker import DockerBackend
        from flywheel.sandbox.docker_image import IMAGE, build_image
        if runtime is not None and runtime not in self.runtimes:
            raise SandboxError(f"runtime {runtime!r} is not installed (Debian: apt-get install runsc)")
        client = self.client()
        try:
            client.images.get(IMAGE)
        except Exception:
            build_image(client)
        return DockerBackend(base_url=self.url, runtime=runtime, **kwargs)

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "dockerd.log").read_text(errors="replace")[-800:]
        return ""

    def stop(self, timeout_s: float = 20) -> None:
        """SIGTERM dockerd by its PID (it stops its containers and containerd), then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
