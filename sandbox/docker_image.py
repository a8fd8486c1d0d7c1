"""The `docker` backend's image, built locally from the host's own interpreter: no registry.

A rootfs tarball of the host's Python (binary, standard library, the shared libraries `ldd`
names), the time zone database, `sh` and `cp` (the entry step copies the task's files into the tmpfs work dir), and a
passwd naming uid 65534; `docker import`ed as flywheel-sandbox:latest (about 50 MB, a second or two),
labelled `flywheel.python` with its interpreter's path (the docker backend reads it).

`build_folder_image` layers a host folder (a task environment) over it, again without a registry:
`FROM flywheel-sandbox:latest` + `COPY` from an in-memory build context.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile

from flywheel.sandbox.contract import SandboxError

IMAGE = "flywheel-sandbox:latest"
PYTHON_LABEL = "flywheel.python"  # an image's interpreter, as the docker backend runs it
_SKIP_DIRS = {"test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__"}
_ETC = {"etc/passwd": "root:x:0:0::/:/bin/sh\nnobody:x:65534:65534::/sandbox:/bin/sh\n",
        "etc/group": "root:x:0:\nnogroup:x:65534:\n"}


def _elf_deps(paths: list[str]) -> set[str]:
    """Every shared library (and the loader) that `ldd` says these ELF files need."""
    found = set()
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        found.update(re.findall(r"(/\S+) \(0x", out))
    return found


def _add_path(tar: tarfile.TarFile, path: str, seen: set) -> None:
    """`path` at its real location, plus the symlinks leading to it (merged /usr included)."""
    while os.path.islink(path) and path not in seen:
        seen.add(path)
        link = tarfile.TarInfo(path.lstrip("/"))
        link.type, link.linkname = tarfile.SYMTYPE, os.readlink(path)
        tar.addfile(link)
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    real = os.path.realpath(path)
    if real not in seen:
        seen.add(real)
        tar.add(real, arcname=real.lstrip("/"), recursive=False)


def _interpreter(python: str) -> tuple[str, list[str]]:
    """(sys.executable, its standard library's dirs) of the interpreter `python`."""
    info = json.loads(subprocess.run(
        [python, "-I", "-c", "import json, sys, sysconfig; print(json.dumps([sys.executable, "
         "sysconfig.get_paths()['stdlib'], sysconfig.get_paths()['platstdlib']]))"],
        capture_output=True, text=True, check=True).stdout)
    return info[0], sorted(set(info[1:]))


def rootfs_tar(python: str = "/usr/bin/python3") -> bytes:
    """The image's root filesystem as an uncompressed tar."""
    executable, stdlib_dirs = _interpreter(python)
    tools = [shutil.which(t, path="/usr/bin:/bin") for t in ("sh", "cp")]
    files, elves = [], [os.path.realpath(executable), *map(os.path.realpath, tools)]
    for top in [*stdlib_dirs, "/usr/share/zoneinfo"]:
        for root, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
            files += [path for path in (os.path.join(root, n) for n in names)  # not localtime:
                      if not os.path.islink(path) or os.path.normpath(  # a link to the host's /etc
                          os.path.join(root, os.readlink(path))).startswith(top + "/")]
    elves += [f for f in files if f.endswith(".so")]
    buf, seen = io.BytesIO(), set()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for top in ("bin", "lib", "lib64"):  # the host's merged-/usr links
            if os.path.islink("/" + top):
                _add_path(tar, "/" + top, seen)
        for d in ("sandbox", "task", "proc", "dev", "sys", "etc"):
            entry = tarfile.TarInfo(d)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(entry)
        tmp = tarfile.TarInfo("tmp")  # as under bwrap: /tmp is the work dir
        tmp.type, tmp.linkname = tarfile.SYMTYPE, "/sandbox"
        tar.addfile(tmp)
        for name, text in _ETC.items():
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode = len(text), 0o644
            tar.addfile(entry, io.BytesIO(text.encode()))
        for path in [executable, "/usr/bin/python3", *tools, *files, *sorted(_elf_deps(elves))]:
            if os.path.lexists(path):
                _add_path(tar, path, seen)
    return buf.getvalue()


def build_image(client, python: str = "/usr/bin/python3", tag: str = IMAGE) -> str:
    """`docker import` the rootfs as `tag` on `client`'s daemon; returns the image id."""
    repository, _, version = tag.partition(":")
    try:
        executable, _ = _interpreter(python)
        client.api.import_image_from_data(rootfs_tar(python), repository=repository,
                                          tag=version or "latest",
                                          changes=[f"LABEL {PYTHON_LABEL}={executable}"])
        return client.images.get(tag).id
    except Exception as e:
        raise SandboxError(f"cannot build the sandbox image {tag}: {e}") from e


def build_folder_image(client, folder: str, dest: str, tag: str, base: str = IMAGE) -> str:
    """The image `tag`: `base` (built first when missing and it is the sandbox's own image) with
    the host `folder` copied to `dest`, world-readable, owned by root; returns the image id.
    Offline: the build context is made here, and `base` is never pulled."""
    try:
        try:
            client.images.get(base)
        except Exception:
            if base != IMAGE:
                raise
            build_image(client)
        with tempfile.TemporaryFile() as context:  # on disk: an environment may be large
            with tarfile.open(fileobj=context, mode="w") as tar:
                dockerfile = f"FROM {base}\nCOPY folder {dest}\n".encode()
                entry = tarfile.TarInfo("Dockerfile")
                entry.size, entry.mode = len(dockerfile), 0o644
                tar.addfile(entry, io.BytesIO(dockerfile))
                tar.add(folder, arcname="folder", filter=_readable)
            context.seek(0)
            image, _ = client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True,
                                           pull=False, network_mode="none")
        return image.id
    except SandboxError:
        raise
    except Exception as e:
        raise SandboxError(f"cannot build the image {tag} from {folder}: {e}") from e


def _readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A build-context entry owned by root, readable (not writable) by the sandbox's uid."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    if info.isdir() or info.mode & 0o100:
        info.mode = 0o755
    elif info.isfile():
        info.mode = 0o644
    return info
