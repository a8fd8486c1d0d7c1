"""`<run>/run.log`: what `flywheel run` showed on the screen, plus library warnings and timings.

    2026-12-03T11:40:02Z    12.3s iteration 0  held-out pass@1 all 0.412 add 0.500 ...
    2026-12-03T11:40:02Z    12.3s timing iteration 0: rollout 8.1 s, train 1.9 s
    2026-12-03T11:40:03Z    13.0s WARNING apache_beam.ml.inference.base: Resource module ...

Every line carries the UTC time and the seconds since the command started. While the log is open,
log records of the libraries below Flywheel (Beam, gRPC, ...) and Python warnings go to it, not
to the screen, where they would bury the run's own lines. A resumed run appends to the same log.
A gs:// run directory gets its log when the command ends (object stores cannot append).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import tempfile
import threading
import time

from rich.console import Console

from flywheel.cli.terminal import log_console

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


class _Stamped:
    """A text file-like that starts every line written to it with the time and elapsed seconds."""

    def __init__(self, file, started: float):
        self.file, self.started = file, started
        self.partial, self.lock = "", threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            *lines, self.partial = (self.partial + text).split("\n")
            now = time.time()
            stamp = (f"{dt.datetime.fromtimestamp(now, dt.timezone.utc):%Y-%m-%dT%H:%M:%SZ} "
                     f"{now - self.started:7.1f}s ")
            for line in lines:
                self.file.write(stamp + line.rstrip() + "\n")
            self.file.flush()
        return len(text)

    def flush(self) -> None:
        self.file.flush()

    def isatty(self) -> bool:
        return False


class RunLog:
    """Open for the length of a run command: `print` writes to the log what the screen shows,
    `note` what only the log needs (timings)."""

    def __init__(self, run_dir: str):
        from apache_beam.io.filesystems import FileSystems

        from flywheel.transforms.gcs_credentials import anonymous_for_emulator
        self.run_dir, self.path = run_dir, FileSystems.join(run_dir, "run.log")
        self.remote = "://" in run_dir
        if self.remote:
            anonymous_for_emulator()
        self.started = time.time()

    def __enter__(self) -> "RunLog":
        if self.remote:
            self._file = tempfile.NamedTemporaryFile("w+", encoding="utf-8", suffix=".log",
                                                     delete=False)
            self._file.write(self._remote_text())
        else:
            os.makedirs(self.run_dir, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._stamped = _Stamped(self._file, self.started)
        self.console = log_console(self._stamped)
        root = logging.getLogger()
        self._handler = logging.StreamHandler(self._stamped)
        self._handler.setFormatter(logging.Formatter(LOG_FORMAT))
        self._saved_handlers, root.handlers = root.handlers[:], [self._handler]
        logging.captureWarnings(True)
        return self

    def __exit__(self, *exc) -> None:
        self.note(f"command ended after {time.time() - self.started:.1f} s"
                  + (f" ({exc[0].__name__})" if exc[0] else ""))
        logging.captureWarnings(False)
        logging.getLogger().handlers = self._saved_handlers
        self._file.close()
        if self.remote:
            from apache_beam.io.filesystems import FileSystems
            with open(self._file.name, "rb") as f, FileSystems.create(self.path) as out:
                out.write(f.read())
            os.unlink(self._file.name)

    def _remote_text(self) -> str:
        from apache_beam.io.filesystems import FileSystems
        if not FileSystems.exists(self.path):
            return ""
        with FileSystems.open(self.path) as f:
            return f.read().decode("utf-8", "replace")

    def print(self, *objects, **kwargs) -> None:
        self.console.print(*objects, **kwargs)

    def note(self, text: str) -> None:
        self._stamped.write(text + "\n")

    def tee(self, screen: Console):
        """A print function that shows its objects on `screen` and writes them to the log."""
        def show(*objects, **kwargs) -> None:
            screen.print(*objects, **kwargs)
            self.print(*objects, **kwargs)
        return show
