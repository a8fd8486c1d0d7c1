"""Environments: the packages a repository's tests need (pytest and the project's dependencies),
prepared once on the host and mounted read-only into every sandbox run of a task that names one.

    flywheel env build swe-py311 --requirements reqs.txt --wheelhouse wheels/   # offline
    {"task_id": ..., "environment": "swe-py311", ...}                            # a task row

An environment is a folder `<root>/<NAME>` of packages installed with `pip install --target`
(pure-Python packages serve the sandbox's interpreter whatever the host's Python is). The root
is $FLYWHEEL_ENVIRONMENTS, else ~/.cache/flywheel/environments. In the sandbox it sits at
ENV_MOUNT, first on the sys.path of the harness's children and on shell commands' PYTHONPATH.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ENV_MOUNT = "/opt/flywheel-env"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


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
