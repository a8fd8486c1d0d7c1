"""A stored snapshot as a read-only base on this machine, which each call's sandbox mounts.

A stored repository (`{"snapshot": DIGEST, ...}`: SWE-bench rows, users' folders and archives)
can be tens of megabytes; sending it into every tool call costs more than the call. So each
machine writes it out once, under its digest (`$FLYWHEEL_SNAPSHOT_CACHE`, default
`<tmp>/flywheel-snapshots/<hex>/`: `tree/` with the files, world-readable for the sandbox's
unprivileged uid, and `manifest.json`, path -> sha256 of its bytes), and every call mounts it
read-only at BASE_MOUNT. The harness copies it into the sandbox's writable work dir (the
writable layer), lays the episode's changes over it, and uses the manifest to know which files
a call changed without hashing the rest. Written under a temporary name and renamed, so a
half-written base is never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading

BASE_MOUNT = "/opt/flywheel-repo"  # where a call's sandbox sees the base


def cache_root() -> str:
    return os.environ.get("FLYWHEEL_SNAPSHOT_CACHE") or os.path.join(tempfile.gettempdir(),
                                                                      "flywheel-snapshots")


def materialized(files: dict[str, str], digest: str) -> str:
    """The host folder holding `files` (the snapshot `digest`) as `tree/` plus `manifest.json`,
    written once per machine."""
    root = cache_root()
    folder = os.path.join(root, digest.removeprefix("sha256:"))
    if os.path.isfile(os.path.join(folder, "manifest.json")):
        return folder
    os.makedirs(root, mode=0o755, exist_ok=True)
    os.chmod(root, 0o755)
    tmp = f"{folder}.tmp-{os.getpid()}-{threading.get_ident()}"
    manifest = {}
    for rel, text in files.items():
        path = os.path.join(tmp, "tree", rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        data = text.encode("utf-8", "surrogatepass")
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)
        manifest[rel] = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(tmp, "tree"), mode=0o755, exist_ok=True)
    with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)
    for here, dirs, names in os.walk(tmp):
        os.chmod(here, 0o755)
    os.chmod(os.path.join(tmp, "manifest.json"), 0o644)
    try:
        os.rename(tmp, folder)
    except OSError:  # another process wrote it first: theirs is the same snapshot
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
