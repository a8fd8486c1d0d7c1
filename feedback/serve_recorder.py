"""`flywheel serve`'s recorder: buffered rows of `interactions` and `feedback`, written as
Parquet files under the record dir every `flush_rows` rows or `flush_seconds`, and on close.

    recorder = TableRecorder("records/app", flush_rows=64, flush_seconds=5)
    recorder.add("interactions", row)      # from any thread
    recorder.close()                       # writes what is buffered; later adds are refused

Each flush writes one file per table and day (schemas.write.write_partitioned), named
`<prefix>-<uuid>.parquet`, so any number of servers may record into one folder. A flush that
fails (a full disk, a gs:// hiccup) keeps its rows for the next one and is logged; past
`max_buffered` rows waiting the server takes no new requests (503) until writes catch up; only
close raises, so a clean stop never loses a row silently.
"""

from __future__ import annotations

import logging
import os
import threading

from flywheel.schemas import read_table
from flywheel.schemas.write import write_partitioned

TABLES = ("interactions", "feedback")
log = logging.getLogger(__name__)


class RecorderClosed(RuntimeError):
    """A row added after close: the caller answers 503, it is not written."""


class TableRecorder:
    def __init__(self, record_dir: str, flush_rows: int = 64, flush_seconds: float = 5.0,
                 prefix: str = "serve", max_buffered: int = 10_000):
        if flush_rows < 1 or not flush_seconds > 0:
            raise ValueError("flush_rows must be >= 1 and flush_seconds > 0")
        self.record_dir, self.flush_rows, self.flush_seconds = record_dir.rstrip("/"), flush_rows, flush_seconds
        self.prefix, self.max_buffered = prefix, max_buffered  # past it the server refuses work
        self.recorder_id = os.path.basename(self.record_dir) or "record"
        self.files: list[str] = []  # written so far, in order
        self.rows_written = {t: 0 for t in TABLES}
        self._rows: dict[str, list[dict]] = {t: [] for t in TABLES}
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()  # one flush at a time: the thread's or close's
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="serve-recorder", daemon=True)
        self._thread.start()

    def known_interactions(self) -> dict[str, str]:
        """interaction id -> the client that called, of the interactions already in the record
        dir (feedback may name them, from the same client)."""
        table = read_table(f"{self.record_dir}/tables/interactions", "interactions",
                           columns=["interaction_id", "client"])
        return dict(zip(table.column("interaction_id").to_pylist(),
                        table.column("client").to_pylist()))

    def full(self) -> bool:
        """Whether writes are so far behind (failing) that new work must wait: rows are never
        dropped, so the server refuses requests (503) rather than buffer without bound."""
        with self._cond:
            return self.buffered() >= self.max_buffered

    def add(self, table: str, row: dict) -> None:
        with self._cond:
            if self._closed:
                raise RecorderClosed("the recorder is closed: the server is stopping")
            self._rows[table].append({"recorder_id": self.recorder_id, **row})
            if self.buffered() >= self.flush_rows:
                self._cond.notify()

    def buffered(self) -> int:
        return sum(len(rows) for rows in self._rows.values())

    def flush(self) -> list[str]:
        """Write what is buffered now; the files written. Rows of a failed write go back to the
        buffer (ahead of newer ones) and the error is raised."""
        with self._write_lock:
            with self._cond:
                taken, self._rows = self._rows, {t: [] for t in TABLES}
            written = []
            for table in TABLES:
                if not taken[table]:
                    continue
                try:
                    written += write_partitioned(self.record_dir, table, taken[table], prefix=self.prefix)
                except Exception:
                    with self._cond:
                        for t in TABLES:  # the tables written have nothing left in `taken`
                            self._rows[t] = taken[t] + self._rows[t]
                    self.files += written
                    raise
                self.rows_written[table] += len(taken[table])
                taken[table] = []
            self.files += written
            return written

    def _loop(self) -> None:
        failed = False  # after a failed write, wait the full period before the next try
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or (
                    not failed and self.buffered() >= self.flush_rows), self.flush_seconds)
                if self._closed:
                    return  # close() writes the rest
            try:
                self.flush()
                failed = False
            except Exception:
                failed = True
                log.exception("serve recorder: writing under %s failed; the rows stay buffered",
                              self.record_dir)

    def close(self) -> None:
        """Refuse new rows, write the buffered ones (raising if that fails)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        self.flush()
