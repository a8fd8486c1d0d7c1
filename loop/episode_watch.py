"""EpisodeWatch: while an iteration rolls out, one event per episode that ends.

RunEpisodes writes each ended episode to the iteration's journal as it ends
(transforms/episode_journal.py); this thread of the driver reads the new files' headers
(records/journal_files.py, without Beam) every `every_s` seconds and sends `episode_end` events
(task, sample, turns, how it ended, its seconds, and how many have ended so far), which the
progress display and the run log show. The watch reads only headers and only of files it has
not seen, so a long iteration costs one listing per poll.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from flywheel.records.journal_files import journal_folder, read_headers

Event = Callable[[str, dict], None]


class EpisodeWatch:
    """A context manager: polls `folder` from enter to exit (and once more at exit)."""

    def __init__(self, folder: str, iteration: int, event: Event, every_s: float = 2.0):
        self.folder, self.iteration, self.event = folder, iteration, event
        self.every_s = every_s
        self.seen: set[str] = set()
        self.ended = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="episode-watch", daemon=True)

    def __enter__(self):
        # episodes kept from a killed run of this iteration are not news: counted, not shown
        self.ended = len(read_headers(self.folder, self.seen))
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.poll()
        return False

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.poll()

    def poll(self) -> None:
        for header in read_headers(self.folder, self.seen):
            self.ended += 1
            try:
                self.event("episode_end", {**header, "iteration": self.iteration,
                                           "ended": self.ended})
            except Exception:  # noqa: BLE001 - a display problem never stops the rollout
                pass


def ended_episodes(run_root: str, iteration: int) -> dict | None:
    """The episodes of iteration `iteration` that have ended and are not yet committed (its
    journal): how many, how they ended, their turns and seconds; None when there are none."""
    folder = journal_folder(run_root, iteration)
    headers = read_headers(folder)
    if not headers:
        return None
    ends = Counter(str(h.get("end")) for h in headers)
    return {"ended": len(headers), "by_end": dict(sorted(ends.items())), "folder": folder,
            "turns": sum(h.get("turns", 0) for h in headers),
            "seconds": round(sum(h.get("seconds", 0.0) for h in headers), 1)}
