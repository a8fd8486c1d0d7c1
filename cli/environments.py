"""`flywheel env build NAME --requirements FILE [--wheelhouse DIR] [--image]`: prepare a task environment.

    flywheel env build swe-py311 --requirements reqs.txt --wheelhouse wheels/   # offline
    flywheel env build swe-py311 --requirements reqs.txt                        # pip's own index
    flywheel env build swe-py311 --requirements reqs.txt --wheelhouse wheels/ --image

Installs the requirements with `pip install --target` into $FLYWHEEL_ENVIRONMENTS/NAME (default
~/.cache/flywheel/environments/NAME); repository tasks naming `environment: NAME` get it mounted
read-only in their sandbox (domains/environments.py). `--image` also builds the local Docker
image flywheel-env/NAME:latest (the sandbox image with the folder at /opt/flywheel-env, offline),
which tasks name as `image: flywheel-env/NAME` on the docker backend. Exit status 1 when pip or
docker fails.
"""

from __future__ import annotations

from rich.markup import escape

from flywheel.domains.environments import build_environment, build_environment_image, environment_image


def add_parser(sub) -> None:
    env = sub.add_parser("env", help="prepare the package environments repository tasks run with")
    actions = env.add_subparsers(dest="env_command", required=True)
    build = actions.add_parser("build", help="pip install requirements into an environment folder")
    build.add_argument("name", help="the environment's name, as tasks give it in `environment`")
    build.add_argument("--requirements", required=True, metavar="FILE", help="a pip requirements file")
    build.add_argument("--wheelhouse", metavar="DIR",
                       help="install from this folder of wheels alone (offline); default: pip's index")
    build.add_argument("--image", action="store_true",
                       help="also build the Docker image flywheel-env/NAME:latest (tasks: `image`)")
    build.add_argument("--docker-host", default=None, metavar="URL",
                       help="the daemon --image builds on (default $DOCKER_HOST)")


def run(args, console) -> int:
    try:
        if args.image:
            environment_image(args.name)  # a name docker cannot take fails before pip runs
        path = build_environment(args.name, args.requirements, args.wheelhouse)
        console.print(f"built environment {escape(args.name)} in {escape(path)}", highlight=False)
        from flywheel.sandbox.backends.local import UNREACHABLE, reachable_by_sandbox
        if not reachable_by_sandbox(path):  # the docker backend can mount it; local cannot
            console.print(f"[yellow]warning:[/] the local sandbox cannot mount it: "
                          f"{escape(UNREACHABLE)}", highlight=False)
        if args.image:
            tag = build_environment_image(args.name, args.docker_host)
            console.print(f"built image {escape(tag)} (tasks: \"image\": "
                          f"\"{escape(tag.removesuffix(':latest'))}\")", highlight=False)
    except (ValueError, RuntimeError, OSError) as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 1
    return 0
