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

The file layout, the keys and the headers are Beam-free (records/journal_files.py: progress and
`flywheel status` read only headers); here are the coders of an entry's other two parts: the
attempt (AttemptCoder) and the episode's error rows (Beam's deterministic primitives coder).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import apache_beam as beam

from flywheel.records.attempt import Attempt
from flywheel.records.journal_files import (SUFFIX, episode_key, journal_folder, journal_paths,
                                            pack, read_headers, unpack)
from flywheel.schemas import storage
from flywheel.transforms.attempt_coder import AttemptCoder

__all__ = ["EpisodeJournal", "JournalEntry", "episode_key", "journal_folder"]


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
        data = pack(parts)
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
            header, attempt, errors = unpack(data, 3)
            entry = JournalEntry(json.loads(header), self._coder.decode(attempt),
                                 self._errors.decode(errors))
        except Exception:  # noqa: BLE001 - cut short or foreign: the episode simply runs again
            return None
        return entry if entry.header.get("key") == key == episode_key(entry.attempt) else None

    def headers(self, seen: set[str] | None = None) -> list[dict]:
        """Every readable entry's header, oldest first (records/journal_files.read_headers)."""
        return read_headers(self.folder, seen)

    def keys(self) -> set[str]:
        """The keys of the entries in the folder: one listing (on gs://, one request per bundle
        instead of one per episode)."""
        return {path.rsplit("/", 1)[-1][:-len(SUFFIX)] for path in journal_paths(self.folder)}


class _NoPickle(beam.coders.Coder):
    """The primitives coder's fallback here: no value is pickled, and none is unpickled."""

    def encode(self, value):
        raise TypeError(f"a journal entry holds only primitives, not a {type(value).__name__}")

    def decode(self, encoded):
        raise ValueError("a journal entry holds a pickled value: refused")

    def is_deterministic(self) -> bool:
        return True
