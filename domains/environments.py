"""Environments: the packages a repository's tests need (pytest and the project's dependencies),
prepared once on the host and mounted read-only into every sandbox run of a task that names one.

    flywheel env build swe-py311 --requirements reqs.txt --wheelhouse wheels/   # offline
    {"task_id": ..., "environment": "swe-py311", ...}                            # a task row
    flywheel env build swe-py311 --requirements reqs.txt --wheelhouse wheels/ --image
    {"task_id": ..., "image": "flywheel-env/swe-py311", ...}                     # docker, no mount

An environment is a folder `<root>/<NAME>` of packages installed with `pip install --target`
(pure-Python packages serve the sandbox's interpreter whatever the host's Python is). The root
is $FLYWHEEL_ENVIRONMENTS, else ~/.cache/flywheel/environments. In the sandbox it sits at
ENV_MOUNT, first on the sys.path of the harness's children and on shell commands' PYTHONPATH.

With `--image` the folder is also baked into a local Docker image, `flywheel-env/NAME:latest`:
the sandbox image (flywheel-sandbox) with the folder at ENV_MOUNT, built offline (no registry,
nothing pulled). A task naming that `image` runs there on the docker backend with no mount.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ENV_MOUNT = "/opt/flywheel-env"
IMAGE_REPOSITORY = "flywheel-env"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
# a docker repository path component: lowercase, separators only between letters and digits
_IMAGE_NAME = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")


def environments_root() -> str:
    """$FLYWHEEL_ENVIRONMENTS, else ~/.cache/flywheel/environments. As root, keep it where other
    uids can reach (not under /root): the local sandbox runs as a leased unprivileged uid."""
    return os.path.expanduser(os.environ.get("FLYWHEEL_ENVIRONMENTS") or "~/.cache/flywheel/environments")


def environment_dir(name: str) -> str:
    """The folder of environment `name`; ValueError for a name that is not a plain folder name."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"environment name {name!r} must be letters, digits, '.', '_' or '-'")
    return os.path.join(environments_root(), name)


def environment_problem(name) -> str | None:
    """Why environment `name` cannot be used here, or None."""
    try:
        path = environment_dir(name)
    except ValueError as e:
        return f"field `environment`: {e}"
    if not os.path.isdir(path):
        return (f"field `environment`: no environment {name!r} at {path}; build it with "
                f"`flywheel env build {name} --requirements FILE` (or set FLYWHEEL_ENVIRONMENTS)")
    return None


def with_environment(row: dict, name: str | None, default_domain: str | None = None) -> dict:
    """`row` with environment `name` when it names none and its domain runs in environments
    (`flywheel tasks validate --environment NAME`, `flywheel run --environment NAME`: every
    task-file row gets one); `row` itself otherwise. The row's own `environment` wins."""
    if not name or not isinstance(row, dict) or row.get("environment"):
        return row
    from flywheel.domains.registry import DOMAINS
    domain = row.get("domain") or default_domain
    if not isinstance(domain, str) or domain not in DOMAINS or not hasattr(DOMAINS.get(domain), "environment"):
        return row
    return {**row, "environment": name}


def has_pytest(name: str) -> bool | None:
    """Whether environment `name` holds pytest; None where its folder is not on this machine."""
    path = environment_dir(name)
    if not os.path.isdir(path):
        return None
    return os.path.isdir(os.path.join(path, "pytest")) or os.path.isfile(os.path.join(path, "pytest.py"))


def pip_install_command(name: str, requirements: str, wheelhouse: str | None) -> list[str]:
    """pip installing `requirements` into the environment's folder: from `wheelhouse` alone
    (offline), or from pip's configured index when None."""
    source = ["--no-index", "--find-links", wheelhouse] if wheelhouse else []
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *source,
            "--target", environment_dir(name), "--upgrade", "-r", requirements]


def build_environment(name: str, requirements: str, wheelhouse: str | None = None) -> str:
    """Install `requirements` into environment `name` (created or updated); its folder.
    RuntimeError with pip's output when pip fails."""
    path = environment_dir(name)
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(pip_install_command(name, requirements, wheelhouse),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    for root, dirs, files in os.walk(path):  # the sandbox's uid reads it, never writes it
        for entry in dirs + files:
            full = os.path.join(root, entry)
            if not os.path.islink(full):
                os.chmod(full, os.stat(full).st_mode | (0o555 if entry in dirs else 0o444))
    os.chmod(path, 0o755)
    return path


def environment_image(name: str) -> str:
    """The image `flywheel env build NAME --image` makes: flywheel-env/NAME:latest. ValueError
    for a name docker cannot take as a repository (uppercase, a leading or doubled separator)."""
    environment_dir(name)
    if not _IMAGE_NAME.fullmatch(name):
        raise ValueError(f"environment name {name!r} cannot name a docker image: use lowercase "
                         f"letters and digits, separated by single '.', '_' or '-'")
    return f"{IMAGE_REPOSITORY}/{name}:latest"


def build_environment_image(name: str, docker_host: str | None = None) -> str:
    """Build environment `name`'s image (its folder over the sandbox image, which is built first
    when missing) on the daemon at `docker_host` (default $DOCKER_HOST, else the local socket);
    its tag. RuntimeError saying why when docker cannot."""
    from flywheel.sandbox.contract import SandboxError
    from flywheel.sandbox.docker_image import build_folder_image
    tag, path = environment_image(name), environment_dir(name)
    if not os.path.isdir(path):
        raise RuntimeError(f"no environment {name!r} at {path}")
    try:
        import docker
    except ImportError:
        raise RuntimeError("building an image needs the Docker SDK: pip install 'flywheel[docker]'") from None
    url = docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.DockerClient(base_url=url, version="auto", timeout=600)
        build_folder_image(client, path, ENV_MOUNT, tag)
    except (SandboxError, docker.errors.DockerException) as e:
        raise RuntimeError(f"cannot build image {tag} on {url}: {e}") from None
    return tag
