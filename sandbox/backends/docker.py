"""The `docker` sandbox backend: one fresh container per run, through the Docker SDK.

    pip install 'flywheel[docker]' && flywheel sandbox build-image
    get_backend("docker", runtime="runsc")     # gVisor, when the daemon has it registered

Each container: no network, memory (no swap) and pids limits, read-only root, a size-capped tmpfs
work dir at /sandbox (also /tmp), every capability dropped, no-new-privileges, uid 65534, rlimits,
a small non-dumpable entry (ENTRY) as pid 1, no log driver (output is streamed and capped here,
never stored). The task's files come in through a read-only bind of a private host dir at /task,
copied into the tmpfs by the entry; stdin comes down the container's stdin pipe. The entry forks
the command (which so has normal signal semantics), reaps every process until the command exits,
and prints the command's CPU time from wait4 on stderr behind a marker, which is taken off again:
the container's own accounting is gone once it has stopped. Being pid 1 and not dumpable, the
entry is the one process of the run besides the code that holds its stdin and stdout, and no
process of the run can reopen them through /proc/1/fd (docker-init and a shell could be).

A request may name its own image (`ExecRequest.image`, e.g. `flywheel-env/NAME` from `flywheel
env build NAME --image`, or a SWE-bench image loaded with `docker load`); everything above holds
for it too. It must be on the daemon already (never pulled: runs have no network). Its Python
is the image's label `flywheel.python`, else the first of PYTHONS it holds; found once per image
id. The entry runs in it with `-I -S`; the command's "python" with `-I -B`, which keeps the
interpreter's own site-packages (pytest installed in the image, say) and never the work dir.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import threading
import time
import weakref
from pathlib import PurePosixPath

from flywheel.sandbox.contract import (
    ExecRequest, ExecResult, SandboxBackend, SandboxError, cpu_seconds, decode_output, encode_text,
    register_backend, resolve_command)
from flywheel.sandbox.bwrap import ENV, SANDBOX_UID, WORKDIR
from flywheel.sandbox.docker_image import IMAGE, PYTHON_LABEL
from flywheel.sandbox.exit_status import exit_code, kill_reason
from flywheel.sandbox.seccomp import docker_profile

CPU_MARK = "\n@flywheel-cpu@\n"
ENTRY = '''import ctypes, os, shutil, sys
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/1/fd stays closed to the run
shutil.copytree('/task/files', '/sandbox', dirs_exist_ok=True)
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as e:
        os.write(2, f'exec: {sys.argv[1]}: not found ({e.strerror})'.encode())
        os._exit(127)
os.close(0)
while True:  # pid 1 reaps every orphan; the run ends with the command
    done, status, usage = os.wait4(-1, 0)
    if done == pid:
        break
os.write(2, f'\\n@flywheel-cpu@\\n{(usage.ru_utime + usage.ru_stime) * 1000:.1f}\\n'.encode())
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
'''
_CPU_MS = re.compile(r"\d+(\.\d+)?")
SECCOMP_PROFILE = docker_profile()
PYTHONS = ("/usr/local/bin/python3", "/usr/bin/python3")  # an unlabelled image's, in this order
_PATH = re.compile(r"/[A-Za-z0-9._/+-]*")


@register_backend("docker")
class DockerBackend(SandboxBackend):
    """Fresh-container runs; thread-safe (one SDK client per thread). `image` is the default
    image (a request may name another), `python` its interpreter (None: found as for any)."""

    def __init__(self, image: str = IMAGE, runtime: str | None = None, base_url: str | None = None,
                 python: str | None = None):
        try:
            import docker
        except ImportError as e:
            raise SandboxError("the docker backend needs the Docker SDK: "
                               "pip install 'flywheel[docker]'") from e
        self._docker, self.image, self.runtime, self._python = docker, image, runtime, python
        self._url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        self._local = threading.local()
        self._pythons: dict[str, str] = {}  # image id -> its interpreter
        self._pythons_lock = threading.Lock()
        try:
            self._client().ping()
            self._client().images.get(image)
        except docker.errors.ImageNotFound as e:
            raise SandboxError(f"no image {image}: run `flywheel sandbox build-image`") from e
        except docker.errors.DockerException as e:
            raise SandboxError(f"no Docker daemon at {self._url}: {e}") from e
        self._image(image)  # the default image's interpreter, found now: a bad one fails at open
        self._tasks = tempfile.mkdtemp(prefix="flywheel-docker-")
        os.chmod(self._tasks, 0o711)  # the container's uid must traverse it, not list it
        self._empty = os.path.join(self._tasks, "empty")  # over /etc/resolv.conf (the host's DNS)
        with open(self._empty, "w"):
            os.chmod(self._empty, 0o444)
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._tasks, True)  # even unclosed

    def _client(self):
        if not hasattr(self._local, "client"):
            self._local.client = self._docker.DockerClient(base_url=self._url, version="auto",
                                                           timeout=120)
        return self._local.client

    def _image(self, name: str) -> tuple[str, str]:
        """(image id, its Python) of image `name` on the daemon; SandboxError when it is not
        there (never pulled), holds no Python we can find, or declares a VOLUME."""
        errors = self._docker.errors
        try:
            image = self._client().images.get(name)
        except errors.ImageNotFound:
            raise SandboxError(
                f"no image {name!r} on the Docker daemon at {self._url} (the docker backend never "
                f"pulls): `docker pull {name}` or `docker load -i FILE` it first, or build an "
                f"environment's image with `flywheel env build NAME --requirements FILE --image`"
            ) from None
        except errors.DockerException as e:
            raise SandboxError(f"docker cannot inspect image {name!r}: {e}") from e
        volumes = (image.attrs.get("Config") or {}).get("Volumes") or {}
        if volumes:  # docker would give each run a writable, unsized volume there
            raise SandboxError(f"image {name!r} declares VOLUME {', '.join(sorted(volumes))}: the "
                               f"sandbox's root must stay read-only; use an image without volumes")
        if name == self.image and self._python is not None:
            return image.id, self._python
        python = self._pythons.get(image.id)
        if python is None:
            with self._pythons_lock:  # a probe creates a container: once per image id, not per thread
                if image.id not in self._pythons:
                    self._pythons[image.id] = self._find_python(name, image)
                python = self._pythons[image.id]
        return image.id, python

    def _find_python(self, name: str, image) -> str:
        """The label's interpreter, else the first of PYTHONS in the image's filesystem (read
        from a created, never started, container: nothing of the image runs to answer)."""
        labelled = (image.labels or {}).get(PYTHON_LABEL)
        if labelled:
            if not _PATH.fullmatch(labelled):
                raise SandboxError(f"image {name!r}: label {PYTHON_LABEL}={labelled!r} is not an "
                                   f"absolute path")
            return labelled
        errors = self._docker.errors
        try:
            probe = self._client().containers.create(image.id, ["/flywheel-probe"], network_mode="none",
                                                     log_config=self._docker.types.LogConfig(type="none"))
        except errors.DockerException as e:
            raise SandboxError(f"docker cannot inspect image {name!r}: {e}") from e
        try:
            for path in PYTHONS:
                try:
                    stream, _ = probe.get_archive(path)
                    for _ in stream:  # read to the end: the connection goes back to the pool
                        pass
                    return path
                except errors.NotFound:
                    continue
        except errors.DockerException as e:
            raise SandboxError(f"docker cannot inspect image {name!r}: {e}") from e
        finally:
            try:
                probe.remove(force=True, v=True)
            except errors.DockerException:
                pass
        raise SandboxError(f"image {name!r} has no Python at {' or '.join(PYTHONS)}: label it "
                           f"{PYTHON_LABEL}=PATH (e.g. `LABEL {PYTHON_LABEL}=/opt/venv/bin/python` "
                           f"in a Dockerfile FROM it)")

    def _stage(self, request: ExecRequest) -> str:
        """A host dir holding files/, readable (not writable) by the container's uid. Never the
        stdin: a file stays readable by every process of the run (a harness's plan, with its
        expected values, under the eyes of the solution it tests); it goes down a pipe."""
        task = tempfile.mkdtemp(dir=self._tasks)
        os.chmod(task, 0o755)
        for name, text in request.files.items():
            path = os.path.join(task, "files", *PurePosixPath(name).parts)
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "wb") as f:
                f.write(encode_text(text))
        os.makedirs(os.path.join(task, "files"), mode=0o755, exist_ok=True)
        for root, dirs, names in os.walk(task):
            for n in names:
                os.chmod(os.path.join(root, n), 0o644)
            for n in dirs:
                os.chmod(os.path.join(root, n), 0o755)
        return task

    def run(self, request: ExecRequest) -> ExecResult:
        image, python = self._image(request.image or self.image)
        command = resolve_command(request.command, python)
        limits, types = request.limits, self._docker.types
        cpu = cpu_seconds(limits)
        # runsc (2022 release) fails to start with a pids cgroup limit; gVisor enforces RLIMIT_NPROC
        # itself, per sandbox (under runc it would count the host uid 65534 of every container).
        procs = ({"ulimits": [types.Ulimit(name="nproc", soft=limits.processes, hard=limits.processes)]}
                 if self.runtime == "runsc" else {"pids_limit": limits.processes})
        task = self._stage(request)
        client = self._client()
        start = time.monotonic()
        try:
            container = client.containers.create(
                image, command, entrypoint=[python, "-I", "-S", "-c", ENTRY],  # never the image's
                user=f"{SANDBOX_UID}:{SANDBOX_UID}", stdin_open=True,
                working_dir=WORKDIR, environment=ENV, hostname="sandbox", network_mode="none",
                mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m",
                read_only=True, ipc_mode="none",  # private IPC, no /dev/shm
                tmpfs={WORKDIR: f"size={limits.disk_mb}m,uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755"},
                volumes={task: {"bind": "/task", "mode": "ro"},
                         self._empty: {"bind": "/etc/resolv.conf", "mode": "ro"},
                         **{host: {"bind": dest, "mode": "ro"} for host, dest in request.mounts}},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges", f"seccomp={SECCOMP_PROFILE}"], runtime=self.runtime,
                log_config=types.LogConfig(type="none"),
                ulimits=[types.Ulimit(name="cpu", soft=cpu, hard=cpu + 1),
                         types.Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
                         types.Ulimit(name="fsize", soft=limits.file_size_mb << 20,
                                      hard=limits.file_size_mb << 20),
                         types.Ulimit(name="core", soft=0, hard=0),
                         *procs.pop("ulimits", [])], **procs)
        except self._docker.errors.DockerException as e:
            shutil.rmtree(task, ignore_errors=True)
            raise SandboxError(f"docker cannot create the container: {e}") from e
        try:
            return self._supervise(container, request, start)
        except self._docker.errors.DockerException as e:
            raise SandboxError(f"docker failed during the run: {e}") from e
        finally:
            try:
                container.remove(force=True)
            except self._docker.errors.DockerException:
                pass
            shutil.rmtree(task, ignore_errors=True)

    def _supervise(self, container, request: ExecRequest, start: float) -> ExecResult:
        """Start, stream capped output until exit, a limit, or the deadline; then the verdict."""
        limits, reason = request.limits, [None]
        bufs = {0: bytearray(), 1: bytearray()}

        def kill(why: str) -> None:
            if reason[0] is None:
                reason[0] = why
            try:
                container.kill()
            except self._docker.errors.DockerException:
                pass  # already gone

        stream = container.attach(stdout=True, stderr=True, stream=True, demux=True)
        stdin = container.attach_socket(params={"stdin": 1, "stream": 1})
        container.start()
        threading.Thread(target=_feed, args=(stdin, encode_text(request.stdin)), daemon=True).start()
        timer = threading.Timer(max(limits.timeout_s - (time.monotonic() - start), 0), kill,
                                ("timeout",))
        timer.start()
        try:
            for chunks in stream:  # read to the end, even past the cap: a stream nobody reads
                for i, chunk in enumerate(chunks):  # blocks dockerd, and then its kill too
                    if chunk:
                        room = limits.output_bytes - len(bufs[i])
                        bufs[i] += chunk[:room]
                        if len(chunk) > room and reason[0] is None:
                            reason[0] = "output"
                            threading.Thread(target=kill, args=("output",), daemon=True).start()
        finally:
            timer.cancel()
            stream.close()
        status = container.wait(timeout=limits.timeout_s + 30)["StatusCode"]
        container.reload()
        oom = container.attrs["State"].get("OOMKilled", False)
        code = -9 if reason[0] else exit_code(status)
        out, err = (decode_output(bytes(b)) for b in bufs.values())
        err, cpu_ms = split_cpu(err)
        if code == 127 and "exec" in err and not reason[0] and "not found" in err:
            raise SandboxError(f"command not found in the image: {err.strip()[-300:]}")
        why = reason[0] or kill_reason(code, cpu_ms, limits, oom_killed=oom)
        return ExecResult(exit_code=code, stdout=out, stderr=err, timed_out=why == "timeout",
                          truncated=why == "output", kill_reason=why,
                          wall_ms=(time.monotonic() - start) * 1000, cpu_ms=cpu_ms, backend=self.name)

    def close(self) -> None:
        self._cleanup()


def _feed(attached, data: bytes) -> None:
    """Write `data` to the container's stdin, then close it (StdinOnce: the code reads EOF). Once
    the code has read it, it is gone: no process or file of the run holds it any more."""
    sock = getattr(attached, "_sock", attached)
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the container is gone, or never read its input
    finally:
        sock.close()


def split_cpu(stderr: str) -> tuple[str, float]:
    """(the command's stderr, its CPU ms) from the entry's stderr: the CPU ms after CPU_MARK at
    the very end. 0.0 when it is not there (the container was killed, or the output cap cut it
    off). The entry writes it after the command exited; only the last marker counts, so a
    leftover process of the code racing the entry can only misreport the code's own CPU time."""
    head, mark, tail = stderr.rpartition(CPU_MARK)
    if not mark or _CPU_MS.fullmatch(tail.strip()) is None or tail.count("\n") != 1:
        return stderr, 0.0
    return head, float(tail)
