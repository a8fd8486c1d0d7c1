"""The sandbox contract: run a few files and a command under limits, get a result back.

A backend (`local`: bubblewrap namespaces with a warm pool; `docker`; `unsafe-subprocess` for
debugging only) turns an `ExecRequest` into an `ExecResult`. Callers name the backend in config
and ask the registry for it:

    with get_backend("local") as sandbox:
        result = sandbox.run(ExecRequest(files={"main.py": "print(1)"}, command=("python", "main.py")))

What the sandboxed code does wrong (crash, timeout, memory) is data in the result; only a failure of
the sandbox itself (cannot spawn, no interpreter) raises `SandboxError`, which callers record as an
`environment` error rather than blaming the policy.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from flywheel.registry import Registry

KILL_REASONS = (None, "timeout", "cpu", "memory", "output", "processes", "signal")
PYTHON = "python"  # as a command's first word: the sandbox's own interpreter (see ExecRequest)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run; every backend enforces them as closely as it can."""

    timeout_s: float = 5.0        # wall clock
    cpu_s: float | None = None    # default: ceil(timeout_s)
    memory_mb: int = 512          # address space (RLIMIT_AS)
    output_bytes: int = 65536     # cap on stdout and on stderr, each
    processes: int = 32           # process-count limit (threads count too)
    file_size_mb: int = 16        # largest file the code may write (RLIMIT_FSIZE)
    open_files: int = 64          # RLIMIT_NOFILE
    disk_mb: int = 64             # size of the work dir's tmpfs, where the backend has one


def cpu_seconds(limits: Limits) -> int:
    """The CPU limit in whole seconds, the granularity of RLIMIT_CPU."""
    return math.ceil(limits.cpu_s if limits.cpu_s is not None else limits.timeout_s)


@dataclass(frozen=True)
class ExecRequest:
    """Files to write into a fresh work dir, and the command to run there.

    The token "python" as the command's first word means the sandbox's own Python interpreter,
    started in isolated mode (`-I`): the work dir is not on `sys.path`, so a file the code wrote
    (say `unittest.py`) cannot shadow the standard library of a test harness run after it. The
    interpreter's own site-packages stay on it (`-I` drops only the user's site and PYTHON*
    variables), so packages installed in an image serve the code.

    `image` names the container image a docker-like backend runs the request in (None: the
    backend's default image); it must be present on the daemon, which never pulls it. The
    `local` backend ignores it (there the task's environment folder supplies the packages);
    `remote` and `unsafe-subprocess` refuse a request with one.
    """

    files: Mapping[str, str]      # relative path -> text
    command: Sequence[str]
    stdin: str = ""
    limits: Limits = Limits()
    # (host directory, path in the sandbox) pairs, read-only: a prepared environment (packages
    # installed with `pip install --target`) at /opt/NAME. A backend that cannot mount refuses.
    mounts: tuple[tuple[str, str], ...] = ()
    image: str | None = None

    def __post_init__(self):
        # Checked here, not in a backend, so a bad request fails where it is built (an `input`
        # error) and no backend can forget it.
        if not self.command:
            raise ValueError("empty command")
        for path in self.files:
            parts = PurePosixPath(path).parts
            if not parts or parts[0] == "/" or ".." in parts:
                raise ValueError(f"file path {path!r} escapes the work dir")
            if "\0" in path or any("\ud800" <= c <= "\udfff" for c in path):
                raise ValueError(f"file path {path!r} cannot be a file name (NUL or a lone surrogate)")
        object.__setattr__(self, "mounts", tuple(check_mount(m) for m in self.mounts))
        if self.image is not None:
            check_image(self.image)


MOUNT_ROOT = PurePosixPath("/opt")


def check_mount(mount) -> tuple[str, str]:
    """`mount` as a (host dir, sandbox path) pair, or ValueError: both absolute, the sandbox path
    below /opt (nothing the sandbox itself needs lives there) and neither climbing out with `..`."""
    try:
        host, dest = mount
    except (TypeError, ValueError):
        raise ValueError(f"mount {mount!r} is not a (host dir, sandbox path) pair") from None
    for path in (host, dest):
        if not isinstance(path, str) or "\0" in path or not path.startswith("/"):
            raise ValueError(f"mount path {path!r} must be an absolute path")
        if ".." in PurePosixPath(path).parts:
            raise ValueError(f"mount path {path!r} must not contain '..'")
    if MOUNT_ROOT not in PurePosixPath(dest).parents:
        raise ValueError(f"mount point {dest!r} must be below {MOUNT_ROOT}/ (e.g. /opt/flywheel-env)")
    return host, dest


def refuse_mounts(request: "ExecRequest", backend: str) -> None:
    """SandboxError (an environment error) when `request` has mounts `backend` cannot make."""
    if request.mounts:
        raise SandboxError(f"mounts are not supported by the {backend!r} sandbox backend; "
                           f"use the local or docker backend for tasks with an environment")


# A docker reference as `docker run` takes it: [REGISTRY[:PORT]/]PATH[:TAG][@DIGEST]. Only its
# shape is checked here (the daemon judges the rest): no spaces, no option-like leading '-'.
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*")
IMAGE_MAX = 400


def check_image(image) -> str:
    """`image` when it has the shape of a docker image reference, else ValueError."""
    if not isinstance(image, str) or len(image) > IMAGE_MAX or not _IMAGE.fullmatch(image):
        raise ValueError(f"image {str(image)[:80]!r} is not a docker image reference (letters, "
                         f"digits and . _ - / : @, starting with a letter or digit, at most "
                         f"{IMAGE_MAX} characters)")
    return image


def refuse_image(request: "ExecRequest", backend: str) -> None:
    """SandboxError (an environment error) when `request` names an image `backend` cannot run."""
    if request.image is not None:
        raise SandboxError(f"images are not supported by the {backend!r} sandbox backend "
                           f"(request image {request.image!r}); use the docker backend for tasks "
                           f"that name an image")


def encode_text(text: str) -> bytes:
    """`text` (a file's contents, stdin) as the bytes the sandbox gets: UTF-8, with lone
    surrogates written as they are (surrogatepass) rather than raising. Model output may hold
    them; what the code then makes of the invalid bytes is its own doing, never our exception."""
    return text.encode("utf-8", "surrogatepass")


def decode_output(data: bytes) -> str:
    """Bytes the code emitted (stdout, stderr, a file's contents) as text any table can store:
    invalid UTF-8 becomes U+FFFD; NUL and every valid character stay."""
    return data.decode("utf-8", "replace")


def resolve_command(command: Sequence[str], python: str | None,
                    find: Callable[[str], str] | None = None) -> list[str]:
    """The argv that runs `command`: the token "python" becomes `python -I -B` (the sandbox's
    interpreter in isolated mode; -B because -I ignores PYTHONDONTWRITEBYTECODE), or stays the
    token when `python` is None (a warm server runs it in its own interpreter, as `-I` would);
    any other first word becomes `find(word)` when `find` is given (its path in the sandbox)."""
    program, args = command[0], list(command[1:])
    if program == PYTHON:
        return [PYTHON, *args] if python is None else [python, "-I", "-B", *args]
    return [find(program) if find else program, *args]


@dataclass(frozen=True)
class ExecResult:
    """What happened. `exit_code` is negative when a signal killed the process (Popen style)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool               # the output cap was hit
    kill_reason: str | None       # one of KILL_REASONS
    wall_ms: float
    cpu_ms: float
    backend: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class SandboxError(Exception):
    """The sandbox itself failed (spawn failed, interpreter missing...): an environment-side
    error, never the code's fault."""


class SandboxBackend(abc.ABC):
    """Runs requests; one instance is opened once (e.g. in `DoFn.setup`) and shared by threads."""

    name: str = ""

    @classmethod
    def one_shot_options(cls) -> dict:
        """Options for an instance opened for a single run (`flywheel sandbox exec`), where
        nothing started ahead is ever reused; none by default."""
        return {}

    @abc.abstractmethod
    def run(self, request: ExecRequest) -> ExecResult:
        """Run `request` to completion and report; thread-safe."""

    def close(self) -> None:
        """Release pools, daemons, temp dirs. The default has nothing to release."""

    def __enter__(self) -> "SandboxBackend":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


# The built-in backends are the modules of sandbox/backends/, imported on the first lookup that misses.
BACKENDS: Registry[type[SandboxBackend]] = Registry("sandbox backend", home="flywheel.sandbox.backends")


def register_backend(name: str):
    """Class decorator: make a `SandboxBackend` subclass available as `name`."""

    def wrap(cls: type[SandboxBackend]) -> type[SandboxBackend]:
        if not (isinstance(cls, type) and issubclass(cls, SandboxBackend)):
            raise TypeError(f"{cls!r} is not a SandboxBackend subclass")
        BACKENDS.register(name, cls)
        cls.name = name
        return cls

    return wrap


def backend_class(name: str) -> type[SandboxBackend]:
    """The backend class registered as `name`; an unknown name is a ValueError naming the known."""
    try:
        return BACKENDS.get(name)
    except KeyError as e:
        raise ValueError(e.args[0]) from None


def check_options(name: str, options: Mapping[str, object]) -> type[SandboxBackend]:
    """The backend class `name`, once `options` are known to be its constructor's keywords; an
    unknown name or option is a ValueError naming what the backend takes."""
    cls = backend_class(name)
    try:
        inspect.signature(cls).bind(**options)
    except TypeError:
        takes = [p for p in inspect.signature(cls).parameters if not p.startswith("_")]
        raise ValueError(f"sandbox backend {name!r} does not take the options "
                         f"{sorted(options)}; it takes {', '.join(takes) or 'none'}") from None
    return cls


def get_backend(name: str, **kwargs) -> SandboxBackend:
    """A new instance of the backend called `name`, built with `kwargs`."""
    return check_options(name, kwargs)(**kwargs)


def available_backends() -> list[str]:
    """Names `get_backend` accepts."""
    return BACKENDS.names()
