"""A Harbor task's image, built offline from its `environment/Dockerfile` on the Docker daemon.

    build_task_image(client, task)   # `flywheel tasks validate --sandbox docker` calls it

Runs never pull (they have no network), so the build does not either: the Dockerfile's base
image must already be on the daemon, or the build stops with a message naming it and how to
get it (`docker pull` on a machine with a network, or `docker load`). The build context is the
task's `environment/` files as the task row carries them; the build has no network
(`network_mode="none"`), so a `RUN` that downloads fails, told with the build's last lines. The
image is tagged by a digest of the context (the task's `image`), so a changed environment is
a new image and an unchanged one is built once.
"""

from __future__ import annotations

import base64
import io
import tarfile

from flywheel.families.harbor.dockerfile import parse_dockerfile
from flywheel.sandbox.contract import SandboxError


def _context(task: dict) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        files = {**{k: v.encode("utf-8", "surrogatepass") for k, v in task["context_files"].items()},
                 **{k: base64.b64decode(v) for k, v in task["context_binary"].items()}}
        for rel, data in sorted(files.items()):
            entry = tarfile.TarInfo(rel)
            entry.size, entry.mode = len(data), 0o755 if data.startswith(b"#!") else 0o644
            tar.addfile(entry, io.BytesIO(data))
    buf.seek(0)
    return buf


def build_task_image(client, task: dict, timeout_s: float = 600) -> str:
    """The task's image on `client`'s daemon (built when missing); SandboxError saying why not."""
    import docker
    tag = task["image"]
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    if "Dockerfile" not in task.get("context_files", {}):
        raise SandboxError(f"task {task['task_id']}: image {tag} is not on the Docker daemon "
                           f"(task.toml names it): `docker pull {tag}` or `docker load -i FILE` first")
    base = parse_dockerfile(task["context_files"]["Dockerfile"]).base
    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        raise SandboxError(
            f"task {task['task_id']}: its Dockerfile's base image {base} is not on the Docker "
            f"daemon, and builds here never pull: `docker pull {base}` where there is a network "
            f"(or `docker save {base}` there and `docker load -i FILE` here), then validate "
            f"again") from None
    try:
        client.images.build(fileobj=_context(task), custom_context=True, tag=tag, rm=True,
                            pull=False, network_mode="none", timeout=int(timeout_s))
    except docker.errors.BuildError as e:
        lines = [str(step.get("stream") or step.get("error") or "").strip() for step in e.build_log]
        raise SandboxError(f"task {task['task_id']}: building {tag} from environment/Dockerfile "
                           f"failed (offline, no network): {e.msg}; "
                           f"{' | '.join(line for line in lines if line)[-600:]}") from None
    except docker.errors.DockerException as e:
        raise SandboxError(f"task {task['task_id']}: docker cannot build {tag}: {e}") from None
    return tag
