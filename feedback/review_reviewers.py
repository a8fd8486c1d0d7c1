"""Who labels on the review page: each reviewer has a token of their own, and a label records the
reviewer its token names, never a name typed on the page (agreement figures and the blind audit
rely on who labelled).

    flywheel review add-reviewer --run-dir runs/r ann     # prints ann's token and link, once

The run keeps `review/reviewers.json` ({"reviewers": {name: {"token_sha256", "added_at"}}}):
digests, not tokens, so whoever can read the run folder cannot label as another. Adding a name
again gives it a new token (the old one stops working). `Reviewers` answers "whose token is
this?" for the server, re-reading the file when it changes, so a reviewer added while the page
runs can label at once. Tokens given to the server directly (a token file, the session's own)
join those of the file.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
import threading
from datetime import datetime, timezone

import pyarrow.fs as pafs

from flywheel.web.service_token import NAME, check_token
from flywheel.schemas import resolve_uri

REGISTRY = "review/reviewers.json"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"a reviewer's name is 1 to 64 letters, digits, `_`, `.` or `-`, not {name!r}")
    return name


def read_registry(run_dir: str) -> dict[str, str]:
    """{reviewer: token digest} of the run's registry ({} when there is none); ValueError for a
    file that is not one."""
    fs, path = resolve_uri(f"{run_dir.rstrip('/')}/{REGISTRY}")
    try:
        with fs.open_input_stream(path) as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return {}
    reviewers = data.get("reviewers") if isinstance(data, dict) else None
    if not isinstance(reviewers, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("token_sha256"), str) for v in reviewers.values()):
        raise ValueError(f"{run_dir}/{REGISTRY} is not a reviewer registry")
    return {check_name(name): v["token_sha256"] for name, v in reviewers.items()}


def add_reviewer(run_dir: str, name: str) -> tuple[str, bool]:
    """(a new token for `name`, whether the name was already there and its old token is now
    void), recorded in the run's registry as its digest."""
    check_name(name)
    uri = f"{run_dir.rstrip('/')}/{REGISTRY}"
    fs, path = resolve_uri(uri)
    try:
        with fs.open_input_stream(path) as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        data = {"reviewers": {}}
    read_registry(run_dir)  # a damaged file is refused, never overwritten
    token = secrets.token_urlsafe(24)
    replaced = name in data["reviewers"]
    data["reviewers"][name] = {"token_sha256": token_digest(token),
                               "added_at": datetime.now(timezone.utc).isoformat()}
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    if isinstance(fs, pafs.LocalFileSystem):  # 0600, replaced whole (a reader never sees half)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".reviewers-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    else:
        fs.create_dir(os.path.dirname(path), recursive=True)
        with fs.open_output_stream(path) as f:
            f.write(text.encode())
    return token, replaced


class Reviewers:
    """Token -> reviewer for a server: the run's registry (re-read when it changes) and the
    tokens given directly ({name: token})."""

    def __init__(self, run_dir: str, given: dict[str, str] | None = None):
        self.run_dir = run_dir.rstrip("/")
        self.given = [(check_name(n), token_digest(check_token(t, f"the token of {n}")))
                      for n, t in (given or {}).items()]
        self._lock = threading.Lock()
        self._seen: tuple | None = None
        self._registry: dict[str, str] = {}
        self.refresh()

    def refresh(self) -> list[tuple[str, str]]:
        """(reviewer, digest) of every token that may label now."""
        fs, path = resolve_uri(f"{self.run_dir}/{REGISTRY}")
        info = fs.get_file_info(path)
        seen = (info.type, info.size, info.mtime_ns)
        with self._lock:
            if seen != self._seen:
                self._registry = read_registry(self.run_dir) if info.type == pafs.FileType.File else {}
                self._seen = seen
            return [*self._registry.items(), *self.given]

    def registered(self) -> list[str]:
        """The names in the run's registry."""
        self.refresh()
        return sorted(self._registry)

    def who(self, token: str) -> str | None:
        """The reviewer `token` names, or None (compared in constant time, digest to digest)."""
        digest, found = token_digest(token).encode(), None
        for name, known in self.refresh():
            if hmac.compare_digest(digest, known.encode()):
                found = name
        return found
