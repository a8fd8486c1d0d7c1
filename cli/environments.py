"""`flywheel env build NAME --requirements FILE [--wheelhouse DIR]`: prepare a task environment.

    flywheel env build swe-py311 --requirements reqs.txt --wheelhouse wheels/   # offline
    flywheel env build swe-py311 --requirements reqs.txt                        # pip's own index

Installs the requirements with `pip install --target` into $FLYWHEEL_ENVIRONMENTS/NAME (default
~/.cache/flywheel/environments/NAME); repository tasks naming `environment: NAME` get it mounted
read-only in their sandbox (domains/repo_environments.py). Exit status 1 when pip fails.
"""

from __future__ import annotations

from rich.markup import escape

from flywheel.domains.repo_environments import build_environment


def add_parser(sub) -> None:
    env = sub.add_parser("env", help="prepare the package environments repository tasks run with")
    actions = env.add_subparsers(dest="env_command", required=True)
    build = actions.add_parser("build", help="pip install requirements into an environment folder")
    build.add_argument("name", help="the environment's name, as tasks give it in `environment`")
    build.add_argument("--requirements", required=True, metavar="FILE", help="a pip requirements file")
    build.add_argument("--wheelhouse", metavar="DIR",
                       help="install from this folder of wheels alone (offline); default: pip's index")


def run(args, console) -> int:
    try:
        path = build_environment(args.name, args.requirements, args.wheelhouse)
    except (ValueError, RuntimeError, OSError) as e:
        console.print(f"[red]error:[/] {escape(str(e))}", highlight=False)
        return 1
    console.print(f"built environment {escape(args.name)} in {escape(path)}", highlight=False)
    return 0
