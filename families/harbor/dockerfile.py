"""What a Harbor task's `environment/Dockerfile` asks for, read without Docker.

The rule for running a task without its image (the `local` sandbox, and the `docker` sandbox's
own image): the Dockerfile builds nothing. It has one `FROM` of a plain base (PLAIN_BASES:
python, ubuntu, debian, with any tag), and besides that only `WORKDIR`, `COPY`/`ADD` of files of
its build context into the working directory, `ENV`, and instructions that change nothing on disk
(LABEL, CMD, ENTRYPOINT, EXPOSE, ARG, USER, SHELL, STOPSIGNAL, HEALTHCHECK, MAINTAINER). The
sandbox's own system (bash, coreutils, Python 3 from the host's /usr) stands in for the plain
base, and the copied files are laid out in the working directory. Anything else (a `RUN`, a
second stage, `COPY --from`, an `ADD` of a URL, a copy outside the working directory, another
base) needs the task's image: `needs_image` says why, and the task runs only on `docker`, in the
image images.py builds from the Dockerfile. With no `WORKDIR` the working directory is /app, as
in Terminal-Bench's own tasks.
"""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
from dataclasses import dataclass, field

PLAIN_BASES = ("python", "ubuntu", "debian")
DEFAULT_WORKDIR = "/app"
INERT = {"LABEL", "CMD", "ENTRYPOINT", "EXPOSE", "ARG", "USER", "SHELL", "STOPSIGNAL",
         "HEALTHCHECK", "MAINTAINER", "ONBUILD", "VOLUME"}


class DockerfileError(ValueError):
    """A Dockerfile this reader cannot make sense of ("line N: ...")."""


@dataclass
class Environment:
    base: str = ""
    workdir: str = DEFAULT_WORKDIR
    copies: list[tuple[list[str], str]] = field(default_factory=list)  # (sources, absolute dest)
    env: dict[str, str] = field(default_factory=dict)
    needs_image: str | None = None  # why the task needs its image built, or None

    def need(self, why: str) -> None:
        self.needs_image = self.needs_image or why


def _lines(text: str):
    """(line number, instruction text) with `\\` continuations joined and comments dropped."""
    number, parts, start = 0, [], 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not parts and (not line or line.startswith("#")):
            continue
        if parts and line.startswith("#"):
            continue
        start = start or number
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, " ".join(parts)
        parts, start = [], 0
    if parts:
        yield start, " ".join(parts)


def _base_name(image: str) -> str:
    """`python` of `docker.io/library/python:3.11-slim@sha256:...`."""
    name = image.split("@")[0].rsplit("/", 1)[-1]
    return name.split(":")[0]


def parse_dockerfile(text: str) -> Environment:
    env, froms = Environment(), 0
    for number, line in _lines(text):
        word, _, rest = line.partition(" ")
        op, rest = word.upper(), rest.strip()
        if op == "FROM":
            froms += 1
            args = rest.split()
            if not args:
                raise DockerfileError(f"line {number}: FROM names no image")
            env.base = args[-1] if len(args) == 1 else args[0]
            if froms > 1 or "--platform" in rest or " as " in f" {rest.lower()} ":
                env.need(f"line {number}: a multi-stage or platform-specific build")
            elif _base_name(env.base) not in PLAIN_BASES:
                env.need(f"line {number}: FROM {env.base} is not a plain base "
                         f"({', '.join(PLAIN_BASES)})")
        elif froms == 0 and op != "ARG":
            raise DockerfileError(f"line {number}: {op} before FROM")
        elif op == "WORKDIR":
            env.workdir = posixpath.normpath(posixpath.join(env.workdir, rest.strip("\"'")))
        elif op in ("COPY", "ADD"):
            _copy(env, number, op, rest)
        elif op == "ENV":
            _env(env, number, rest)
        elif op == "RUN":
            env.need(f"line {number}: RUN {rest[:60]}")
        elif op not in INERT:
            raise DockerfileError(f"line {number}: unknown instruction {word!r}")
    if froms == 0:
        raise DockerfileError("no FROM line")
    for _, dest in env.copies:
        if dest != env.workdir and not dest.startswith(env.workdir.rstrip("/") + "/"):
            env.need(f"COPY to {dest} is outside the working directory {env.workdir}")
    return env


def _copy(env: Environment, number: int, op: str, rest: str) -> None:
    try:
        words = shlex.split(rest)
    except ValueError as e:
        raise DockerfileError(f"line {number}: {op}: {e}") from None
    flags = [w for w in words if w.startswith("--")]
    args = [w for w in words if not w.startswith("--")]
    if rest.startswith("["):
        import json
        try:
            args = json.loads(rest)
        except ValueError:
            raise DockerfileError(f"line {number}: {op}: unreadable JSON form") from None
    if len(args) < 2:
        raise DockerfileError(f"line {number}: {op} needs a source and a destination")
    *sources, dest = args
    if any(f.startswith("--from") for f in flags):
        env.need(f"line {number}: {op} --from another stage or image")
        return
    for source in sources:
        if "://" in source or (op == "ADD" and source.endswith((".tar", ".gz", ".tgz", ".xz", ".bz2"))):
            env.need(f"line {number}: ADD {source} (a URL or an archive)")
            return
        if posixpath.isabs(source) or ".." in posixpath.normpath(source).split("/"):
            raise DockerfileError(f"line {number}: {op} source {source!r} leaves the build context")
    absolute = posixpath.normpath(posixpath.join(env.workdir, dest))
    env.copies.append((sources, absolute + ("/" if dest.endswith("/") else "")))


def _env(env: Environment, number: int, rest: str) -> None:
    try:
        words = shlex.split(rest)
    except ValueError as e:
        raise DockerfileError(f"line {number}: ENV: {e}") from None
    if words and "=" not in words[0]:
        env.env[words[0]] = " ".join(words[1:])
        return
    for word in words:
        key, eq, value = word.partition("=")
        if not eq:
            raise DockerfileError(f"line {number}: ENV {word!r} is not KEY=VALUE")
        env.env[key] = value


def layout(env: Environment, context: list[str]) -> dict[str, str]:
    """{path in the working directory: path in the build context} of every file the COPY lines
    put there, later copies over earlier ones, as `docker build` would lay them out."""
    placed: dict[str, str] = {}
    root = env.workdir.rstrip("/")
    for sources, dest in env.copies:
        many = len(sources) > 1 or dest.endswith("/") or posixpath.normpath(dest) == env.workdir
        for source in sources:
            source = posixpath.normpath(source)
            matched = [p for p in context if fnmatch.fnmatchcase(p, source)]
            inside = [p for p in context if source == "." or p.startswith(source + "/")]
            if inside:  # a directory: its contents go into dest
                base = "" if source == "." else source + "/"
                for path in inside:
                    placed[_rel(root, posixpath.join(dest, path[len(base):]))] = path
            for path in matched:
                target = posixpath.join(dest, posixpath.basename(path)) if many or any(
                    c in source for c in "*?[") else dest
                placed[_rel(root, target)] = path
    return placed


def _rel(root: str, path: str) -> str:
    path = posixpath.normpath(path)
    return posixpath.relpath(path, root or "/")
