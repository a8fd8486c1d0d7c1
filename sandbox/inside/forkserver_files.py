"""A session's file operations, done by the warm server itself between turns (nothing runs then).

Shipped into the sandbox beside forkserver.py; standard library only. Snapshots live in
the server's memory, out of the code's reach. Paths are resolved without trusting what the code
left in the work dir: symlinks are never followed out of it, FIFOs and devices never opened.
"""

import os
import shutil

from forkserver_child import WORKDIR, decode_output

SNAPSHOTS = {}


def inside(rel):
    """The absolute path of `rel` in the work dir, refusing any that a symlink the code planted
    (say to /proc/self) would lead out of it."""
    path = os.path.realpath(os.path.join(WORKDIR, rel))
    if not path.startswith(WORKDIR + "/"):
        raise ValueError(f"{rel!r} leads out of the work dir")
    return path


def tree():
    """Every regular file, symlink and dir of the work dir; never follows a link, never opens a
    FIFO or device the code left there."""
    entries = {}
    for root, dirs, names in os.walk(WORKDIR):
        for name in dirs + names:
            path = os.path.join(root, name)
            rel, st = os.path.relpath(path, WORKDIR), os.lstat(path)
            if os.path.islink(path):
                entries[rel] = ("l", os.readlink(path))
            elif os.path.isdir(path):
                entries[rel] = ("d", None)
            elif st.st_mode & 0o170000 == 0o100000:
                with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                    entries[rel] = ("f", f.read())
    return entries


def load(entries):
    for name in os.listdir(WORKDIR):
        path = os.path.join(WORKDIR, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for rel, (kind, data) in sorted(entries.items()):
        path = os.path.join(WORKDIR, rel)
        if kind == "d":
            os.makedirs(path, exist_ok=True)
        elif kind == "l":
            os.symlink(data, path)
        else:
            with open(path, "wb") as f:
                f.write(data)


def session_op(req):
    """A session's file operations, done by the server itself between turns (nothing runs)."""
    op = req["op"]
    if op == "snapshot":
        SNAPSHOTS[req["name"]] = tree()
    elif op == "restore":
        load(SNAPSHOTS[req["name"]])
    elif op == "write":
        for rel, text in req["files"].items():
            path = inside(rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if os.path.islink(path):
                os.unlink(path)
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(text)  # as contract.encode_text
    elif op == "delete":
        for rel in req["paths"]:
            os.unlink(inside(rel))
    elif op == "read":
        # A name the code made may be any bytes but "/" and NUL: backslash-escaped, as text.
        return {"files": {os.fsencode(rel).decode("utf-8", "backslashreplace"): decode_output(data)
                          for rel, (kind, data) in tree().items() if kind == "f"}}
    return {"ok": True}
