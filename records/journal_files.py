"""The episode journal's files, free of Beam: where they are, who each is, and their headers.

    <run>/journal/iteration=K/<key>.episode      one file per ended episode

File layout: MAGIC, then length-prefixed parts: a JSON header (what progress and status show,
and the digest of the weights that sampled the episode), then the attempt and the episode's
error rows as the journal's coders write them (transforms/episode_journal.py). Progress and
`flywheel status` read only headers, here, so they start without Beam.
"""

from __future__ import annotations

import hashlib
import json
import struct

from flywheel.records.attempt import Attempt
from flywheel.schemas import storage

MAGIC = b"flywheel-episode 1\n"
SUFFIX = ".episode"
_LEN = struct.Struct(">Q")


def journal_folder(run_root: str, iteration: int) -> str:
    """Where iteration `iteration`'s ended episodes are journaled (outside iterations/K, which a
    rerun of the iteration deletes first)."""
    return storage.join(run_root, "journal", f"iteration={iteration}")


def episode_key(attempt: Attempt) -> str:
    """Who the episode is: the same attempt of a rerun of the same iteration has the same key."""
    who = [attempt.run_id, attempt.iteration, attempt.policy_version, attempt.mode, attempt.domain,
           attempt.task_id, attempt.group_id, attempt.sample_index, attempt.seed]
    return hashlib.sha256(json.dumps(who, default=str).encode()).hexdigest()[:40]


def journal_paths(folder: str) -> list[str]:
    """The entry files in `folder`; [] when it cannot be listed now (the journal is a safety net,
    never a failure)."""
    try:
        return [path for path in storage.list_files(folder) if path.endswith(SUFFIX)]
    except Exception:  # noqa: BLE001
        return []


def read_headers(folder: str, seen: set[str] | None = None) -> list[dict]:
    """Every readable entry's header in `folder`, oldest first. `seen`: paths already read,
    skipped; the paths read now are added to it."""
    found = []
    for path in journal_paths(folder):
        if seen is not None and path in seen:
            continue
        try:
            fs, local = storage.resolve_uri(path)
            with fs.open_input_file(local) as f:
                data = f.read(len(MAGIC) + _LEN.size)
                if not data.startswith(MAGIC):
                    continue
                (size,) = _LEN.unpack(data[len(MAGIC):])
                found.append(json.loads(f.read(size)))
            if seen is not None:
                seen.add(path)
        except Exception:  # noqa: BLE001 - being written or cut short: not counted yet
            continue
    return sorted(found, key=lambda h: h.get("ended_at", 0))


def pack(parts: list[bytes]) -> bytes:
    """An entry file's bytes: MAGIC, then each part after its length."""
    return MAGIC + b"".join(_LEN.pack(len(p)) + p for p in parts)


def unpack(data: bytes, n: int) -> list[bytes]:
    """The `n` parts of an entry file's bytes; ValueError when it is not one, whole."""
    if not data.startswith(MAGIC):
        raise ValueError("not a journal entry")
    parts, at = [], len(MAGIC)
    for _ in range(n):
        (size,) = _LEN.unpack_from(data, at)
        at += _LEN.size
        if at + size > len(data):
            raise ValueError("cut short")
        parts.append(data[at:at + size])
        at += size
    if at != len(data):
        raise ValueError("trailing bytes")
    return parts
