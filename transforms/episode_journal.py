"""EpisodeJournal: each episode written down the moment it ends, so a killed run keeps it.

    <run>/journal/iteration=K/<key>.episode      one file per ended episode (RunEpisodes writes it)

An agent episode of a real model can take minutes; an iteration of them, hours. The tables are
written when the iteration's pipeline ends, so without this a run killed (or timed out) halfway
leaves nothing of the episodes that did finish. With it:
- the driver counts the files as they appear and shows one line per ended episode (progress);
- `flywheel status` says how many episodes of the iteration in flight have ended, and lists them;
- a resumed run reruns the iteration with the same attempts (same seeds), and RunEpisodes takes
  an episode whose file is there, sampled by the same weights, as it is instead of running it
  again: the tables come out as an uninterrupted run writes them (each request has its own seed).

A file is written whole or not at all (a temporary file renamed into place; object stores create
an object whole), so a kill mid-write leaves no half record: a file that does not read back is
ignored and the episode runs again. The driver removes an iteration's journal once the iteration
is committed (`RunLayout.delete_paths`). The files are read back without pickle: values are Beam's primitives
(numbers, strings, bytes, lists, tuples, dicts, None), and a type that would need pickling is
refused on write (the episode is then simply not journaled; `episode_journal_errors` counts it)
and on read (the entry is ignored), so a run folder others can write cannot run code in a resume.

File layout: MAGIC, then three length-prefixed parts: a JSON header (what progress and status
show, and the digest of the weights that sampled the episode), the attempt (AttemptCoder) and the
episode's error rows (Beam's deterministic primitives coder).
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from dataclasses import dataclass

import apache_beam as beam

from flywheel.records.attempt import Attempt
from flywheel.schemas import storage
from flywheel.transforms.attempt_coder import AttemptCoder

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


@dataclass(frozen=True)
class JournalEntry:
    header: dict
    attempt: Attempt
    errors: list


class EpisodeJournal:
    """Write and read one folder's ended episodes (local or gs://)."""

    def __init__(self, folder: str):
        self.folder = folder
        self._errors = beam.coders.FastPrimitivesCoder(fallback_coder=_NoPickle())
        self._coder = AttemptCoder(values=self._errors)

    def path(self, key: str) -> str:
        return storage.join(self.folder, key + SUFFIX)

    def write(self, attempt: Attempt, errors: list, digest: str | None, seconds: float) -> str:
        """Write the ended `attempt` and its error rows; returns the file's path."""
        header = {"key": episode_key(attempt), "task_id": attempt.task_id,
                  "domain": attempt.domain, "mode": attempt.mode,
                  "sample_index": attempt.sample_index, "turns": len(attempt.turns),
                  "end": attempt.episode_end,
                  "errors": len(errors), "seconds": round(seconds, 3), "digest": digest,
                  "ended_at": time.time()}
        parts = [json.dumps(header, sort_keys=True).encode(), self._coder.encode(attempt),
                 self._errors.encode(list(errors))]
        data = MAGIC + b"".join(_LEN.pack(len(p)) + p for p in parts)
        path = self.path(header["key"])
        # no fsync: a killed process's writes survive it (after a power cut the episode simply
        # runs again)
        storage.write_whole(path, data)
        return path

    def read(self, key: str) -> JournalEntry | None:
        """The entry of `key`, or None when there is none or it does not read back whole."""
        path = self.path(key)
        try:
            data = storage.read_file(path)
            header, attempt, errors = _split(data, 3)
            entry = JournalEntry(json.loads(header), self._coder.decode(attempt),
                                 self._errors.decode(errors))
        except Exception:  # noqa: BLE001 - cut short or foreign: the episode simply runs again
            return None
        return entry if entry.header.get("key") == key == episode_key(entry.attempt) else None

    def headers(self, seen: set[str] | None = None) -> list[dict]:
        """Every readable entry's header, oldest first (progress and status read only these).
        `seen`: paths already read, skipped; the paths read now are added to it."""
        found = []
        for path in self._paths():
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

    def keys(self) -> set[str]:
        """The keys of the entries in the folder: one listing (on gs://, one request per bundle
        instead of one per episode)."""
        return {path.rsplit("/", 1)[-1][:-len(SUFFIX)] for path in self._paths()}

    def _paths(self) -> list[str]:
        try:
            return [path for path in storage.list_files(self.folder) if path.endswith(SUFFIX)]
        except Exception:  # noqa: BLE001 - unreadable now: the journal is a safety net, never a failure
            return []


class _NoPickle(beam.coders.Coder):
    """The primitives coder's fallback here: no value is pickled, and none is unpickled."""

    def encode(self, value):
        raise TypeError(f"a journal entry holds only primitives, not a {type(value).__name__}")

    def decode(self, encoded):
        raise ValueError("a journal entry holds a pickled value: refused")

    def is_deterministic(self) -> bool:
        return True


def _split(data: bytes, n: int) -> list[bytes]:
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
