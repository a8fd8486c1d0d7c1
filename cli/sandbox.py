"""`flywheel sandbox`: run one file in a fresh sandbox, or build the docker backend's image.

    flywheel sandbox exec [--backend NAME] [--sandbox-options KEY=VALUE,...] [--timeout S]
                          [--memory-mb MB] FILE.py [ARG ...]
    flywheel sandbox build-image [--docker-host unix:///path/docker.sock]
    flywheel sandbox serve [--host H] [--port P] [--backend NAME] [--sandbox-options ...]
                           [--token-file F] [--capacity N] [--max-connections N]
                           [--idle-timeout S] [--read-timeout S] [--max-body-mb MB]
                           [--allowed-host NAME[:PORT] ...]

`exec` opens the backend with what it declares for a single run (`local`: no warm pool), then
the options given (`--docker-runtime` and `--docker-host` are `runtime=` and `base_url=`); its
limits default to the sandbox's own `Limits()`. It prints the ExecResult as one JSON object and
exits 0 whatever the code did; a failure of the sandbox itself (an `environment` error) prints
{"error": ..., "kind": "environment"} and exits 1; an option that is not KEY=VALUE exits 2.
`serve` puts a backend (warm pool by default) behind HTTP for the `remote` backend
(sandbox/service.py); SIGTERM or SIGINT drains it: runs in flight finish, new ones are refused.
It refuses to start (exit 2, one line on stderr) with a token file or $FLYWHEEL_SANDBOX_TOKEN that
is empty or not a header-safe token, on an address beyond loopback without a token, and with an
`--allowed-host` that is not a host name. It answers only requests naming one of its own hosts
(web/same_origin.py): a web page cannot reach it, even from 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from flywheel.cli.sandbox_flags import add_sandbox_flags, given_options
from flywheel.sandbox import Limits
from flywheel.web.service_limits import ServiceLimits
from flywheel.cli.arg_types import nonnegative_int, positive_float, positive_int


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `sandbox` (with `exec` and `build-image`) on the CLI's subparsers."""
    p = subparsers.add_parser("sandbox", help="run code in a sandbox; build the docker image")
    sub = p.add_subparsers(dest="sandbox_command", required=True)
    ex = sub.add_parser("exec", help="run FILE.py in a fresh sandbox, print the result as JSON")
    ex.add_argument("file", type=Path)
    ex.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to FILE.py")
    add_sandbox_flags(ex, "--backend")
    ex.add_argument("--timeout", type=positive_float, default=Limits().timeout_s,
                    help="wall-clock limit in seconds (default: %(default)s)")
    ex.add_argument("--memory-mb", type=positive_int, default=Limits().memory_mb,
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
    serve.add_argument("--port", type=nonnegative_int, default=8700,
                       help="0 picks a free port (default: %(default)s)")
    add_sandbox_flags(serve, "--backend")
    serve.add_argument("--token-file", type=Path, default=None,
                       help="file holding the bearer token clients must send (make one with "
                            "`openssl rand -hex 32 > FILE`; the remote backend reads it from "
                            "token_file= or $FLYWHEEL_SANDBOX_TOKEN). Default: $FLYWHEEL_SANDBOX_TOKEN; "
                            "neither: no token, for loopback only, where any local user or "
                            "process may run code through it")
    serve.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                       help="a further Host name clients use (a DNS name of this machine, a "
                            "proxy's); requests naming any other host are refused (DNS "
                            "rebinding). Repeatable")
    serve.add_argument("--capacity", type=positive_int, default=os.cpu_count() or 2,
                       help="runs at once; more are refused with 503 busy (default: CPU count)")
    limits = ServiceLimits()
    serve.add_argument("--max-connections", type=positive_int, default=limits.max_connections,
                       help="connections held at once (a thread each); more are answered 503 and "
                            "closed (default: %(default)s)")
    serve.add_argument("--idle-timeout", type=positive_float, default=limits.idle_timeout_s,
                       help="seconds a kept-alive connection may wait for its next request "
                            "(default: %(default)s)")
    serve.add_argument("--read-timeout", type=positive_float, default=limits.read_timeout_s,
                       help="seconds in all for a request's line and headers, and for its body "
                            f"besides {limits.min_body_rate >> 20} MiB/s (default: %(default)s)")
    serve.add_argument("--max-body-mb", type=positive_float, default=limits.max_body / (1 << 20),
                       help="largest request in MiB; larger ones are refused (413) unread "
                            "(default: %(default)s, the default work dir's size)")
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
    options.update(given_options(args))
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
    from flywheel.web.same_origin import parse_allowed_host
    from flywheel.web.service_token import check_exposure, read_token
    try:  # everything that can refuse the command is checked before the backend starts
        options = backend_options(args, one_shot=False)
        token = read_token(args.token_file)
        check_exposure(args.host, token)
        for entry in args.allowed_host:
            parse_allowed_host(entry)
        limits = ServiceLimits(max_connections=args.max_connections, idle_timeout_s=args.idle_timeout,
                               read_timeout_s=args.read_timeout, max_body=int(args.max_body_mb * (1 << 20)))
        backend = get_backend(args.backend, **options)
    except (ValueError, OSError, SandboxError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if isinstance(e, ValueError) else 1
    with backend:
        try:
            service = SandboxService(backend, args.host, args.port, token=token, capacity=args.capacity,
                                     limits=limits, allowed_hosts=args.allowed_host)
        except OSError as e:  # the address is taken or not this machine's
            print(f"error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
            return 1
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


if __name__ == "__main__":  # also runnable without the main CLI: python -m flywheel.cli.sandbox
    parser = argparse.ArgumentParser(prog="flywheel")
    add_parser(parser.add_subparsers(dest="command", required=True))
    sys.exit(main(parser.parse_args()))
