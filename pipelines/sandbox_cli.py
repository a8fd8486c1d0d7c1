"""`flywheel sandbox`: run one file in a fresh sandbox, or build the docker backend's image.

    flywheel sandbox exec [--backend NAME] [--sandbox-options KEY=VALUE,...] [--timeout S]
                          [--memory-mb MB] FILE.py [ARG ...]
    flywheel sandbox build-image [--docker-host unix:///path/docker.sock]
    flywheel sandbox serve [--host H] [--port P] [--backend NAME] [--sandbox-options ...]
                           [--token-file F] [--capacity N]

`exec` opens the backend with what it declares for a single run (`local`: no warm pool), then
the options given (`--docker-runtime` and `--docker-host` are `runtime=` and `base_url=`); its
limits default to the sandbox's own `Limits()`. It prints the ExecResult as one JSON object and
exits 0 whatever the code did; a failure of the sandbox itself (an `environment` error) prints
{"error": ..., "kind": "environment"} and exits 1; an option that is not KEY=VALUE exits 2.
`serve` puts a backend (warm pool by default) behind HTTP for the `remote` backend
(sandbox/service.py); SIGTERM or SIGINT drains it: runs in flight finish, new ones are refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from flywheel.pipelines.option_items import parse_options, split_items
from flywheel.sandbox import BACKENDS, Limits


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `sandbox` (with `exec` and `build-image`) on the CLI's subparsers."""
    p = subparsers.add_parser("sandbox", help="run code in a sandbox; build the docker image")
    sub = p.add_subparsers(dest="sandbox_command", required=True)
    ex = sub.add_parser("exec", help="run FILE.py in a fresh sandbox, print the result as JSON")
    ex.add_argument("file", type=Path)
    ex.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to FILE.py")
    ex.add_argument("--backend", default="local",
                    help=BACKENDS.help("sandbox backend") + "; default: %(default)s")
    ex.add_argument("--sandbox-options", default="",
                    help="comma-separated KEY=VALUE backend options, e.g. runtime=runsc")
    ex.add_argument("--timeout", type=float, default=Limits().timeout_s,
                    help="wall-clock limit in seconds (default: %(default)s)")
    ex.add_argument("--memory-mb", type=int, default=Limits().memory_mb,
                    help="memory limit in MiB (default: %(default)s)")
    ex.add_argument("--stdin", type=Path, default=None, help="file fed to the code's stdin")
    _docker_flags(ex)
    ex.add_argument("--docker-runtime", default=None, help="docker: OCI runtime, e.g. runsc "
                    "(the same as --sandbox-options runtime=...)")
    build = sub.add_parser("build-image", help="build the docker backend's image (no registry)")
    _docker_flags(build)
    build.add_argument("--python", default="/usr/bin/python3", help="interpreter to package")
    serve = sub.add_parser("serve", help="serve a sandbox backend over HTTP (for --sandbox remote)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8700, help="0 picks a free port (default: %(default)s)")
    serve.add_argument("--backend", default="local",
                       help=BACKENDS.help("sandbox backend") + "; default: %(default)s")
    serve.add_argument("--sandbox-options", default="", help="comma-separated KEY=VALUE backend options")
    serve.add_argument("--token-file", type=Path, default=None,
                       help="file holding the bearer token clients must send (default: "
                            "$FLYWHEEL_SANDBOX_TOKEN; neither: no token, for loopback only)")
    serve.add_argument("--capacity", type=int, default=os.cpu_count() or 2,
                       help="runs at once; more are refused with 503 busy (default: CPU count)")
    return p


def _docker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docker-host", default=None, help="daemon URL (default $DOCKER_HOST)")


def backend_options(args, one_shot: bool = True) -> dict:
    """The backend's options: its one-shot defaults (for one run), the docker flags, then
    --sandbox-options; ValueError for an option that is not KEY=VALUE."""
    from flywheel.sandbox import backend_class
    options = backend_class(args.backend).one_shot_options() if one_shot else {}
    aliases = {"runtime": getattr(args, "docker_runtime", None), "base_url": getattr(args, "docker_host", None)}
    options.update({key: value for key, value in aliases.items() if value is not None})
    options.update(parse_options(split_items(args.sandbox_options, "--sandbox-options"),
                                 "--sandbox-options"))
    return options


def cmd_exec(args) -> int:
    from flywheel.sandbox import ExecRequest, SandboxError, get_backend
    try:
        options = backend_options(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    code = args.file.read_text(encoding="utf-8")
    request = ExecRequest(
        files={args.file.name: code}, command=("python", args.file.name, *args.args),
        stdin=args.stdin.read_text(encoding="utf-8") if args.stdin else "",
        limits=Limits(timeout_s=args.timeout, memory_mb=args.memory_mb))
    try:
        with get_backend(args.backend, **options) as backend:
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


def cmd_serve(args) -> int:
    import signal
    import threading

    from flywheel.sandbox import SandboxError, get_backend
    from flywheel.sandbox.service import SandboxService
    try:
        options = backend_options(args, one_shot=False)
        token = (args.token_file.read_text().strip() if args.token_file
                 else os.environ.get("FLYWHEEL_SANDBOX_TOKEN") or None)
        backend = get_backend(args.backend, **options)
    except (ValueError, OSError, SandboxError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    with backend:
        service = SandboxService(backend, args.host, args.port, token=token, capacity=args.capacity)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        threading.Thread(target=service.serve_forever, daemon=True).start()
        print(f"serving {args.backend} at {service.url} (capacity {args.capacity}"
              f"{', token required' if token else ', no token'})", flush=True)
        stop.wait()
        print("draining: finishing the runs in flight", flush=True)
        service.drain()
        service.shutdown()
        service.server_close()
    return 0


def main(args) -> int:
    return {"exec": cmd_exec, "build-image": cmd_build_image, "serve": cmd_serve}[args.sandbox_command](args)


if __name__ == "__main__":  # also runnable without the main CLI: python -m flywheel.pipelines.sandbox_cli
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    sys.exit(main(parser.parse_args()))
