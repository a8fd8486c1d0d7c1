"""`flywheel sandbox`: run one file in a fresh sandbox, or build the docker backend's image.

    flywheel sandbox exec [--backend local] [--timeout 5] [--memory-mb 512] FILE.py [ARG ...]
    flywheel sandbox build-image [--docker-host unix:///path/docker.sock]

`exec` prints the ExecResult as one JSON object and exits 0 whatever the code did; a failure of
the sandbox itself (an `environment` error) prints {"error": ..., "kind": "environment"} and exits 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `sandbox` (with `exec` and `build-image`) on the CLI's subparsers."""
    p = subparsers.add_parser("sandbox", help="run code in a sandbox; build the docker image")
    sub = p.add_subparsers(dest="sandbox_command", required=True)
    ex = sub.add_parser("exec", help="run FILE.py in a fresh sandbox, print the result as JSON")
    ex.add_argument("file", type=Path)
    ex.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to FILE.py")
    ex.add_argument("--backend", default="local", help="sandbox backend (default: local)")
    ex.add_argument("--timeout", type=float, default=5.0, help="wall-clock limit in seconds")
    ex.add_argument("--memory-mb", type=int, default=512, help="memory limit in MiB")
    ex.add_argument("--stdin", type=Path, default=None, help="file fed to the code's stdin")
    _docker_flags(ex)
    ex.add_argument("--docker-runtime", default=None, help="docker: OCI runtime, e.g. runsc")
    build = sub.add_parser("build-image", help="build the docker backend's image (no registry)")
    _docker_flags(build)
    build.add_argument("--python", default="/usr/bin/python3", help="interpreter to package")
    return p


def _docker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docker-host", default=None, help="daemon URL (default $DOCKER_HOST)")


def _backend_kwargs(args) -> dict:
    if args.backend == "docker":
        return {"runtime": args.docker_runtime, "base_url": args.docker_host}
    if args.backend == "local":
        return {"warm": False}  # one run: a warm pool would cost more than it saves
    return {}


def cmd_exec(args) -> int:
    from flywheel.sandbox import ExecRequest, Limits, SandboxError, get_backend
    code = args.file.read_text(encoding="utf-8")
    request = ExecRequest(
        files={args.file.name: code}, command=("python", args.file.name, *args.args),
        stdin=args.stdin.read_text(encoding="utf-8") if args.stdin else "",
        limits=Limits(timeout_s=args.timeout, memory_mb=args.memory_mb))
    try:
        with get_backend(args.backend, **_backend_kwargs(args)) as backend:
            result = backend.run(request)
    except SandboxError as e:
        print(json.dumps({"error": str(e), "kind": "environment"}))
        return 1
    print(json.dumps(result.to_dict()))
    return 0


def cmd_build_image(args) -> int:
    import docker

    from flywheel.sandbox import SandboxError
    from flywheel.sandbox.docker_image import IMAGE, build_image
    try:
        client = docker.DockerClient(base_url=args.docker_host, version="auto") if args.docker_host \
            else docker.from_env(version="auto")
        image_id = build_image(client, python=args.python)
    except (SandboxError, docker.errors.DockerException) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"built {IMAGE} ({image_id})")
    return 0


def main(args) -> int:
    return {"exec": cmd_exec, "build-image": cmd_build_image}[args.sandbox_command](args)


if __name__ == "__main__":  # also runnable without the main CLI: python -m flywheel.pipelines.sandbox_cli
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    sys.exit(main(parser.parse_args()))
