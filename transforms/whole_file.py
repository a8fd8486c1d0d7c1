"""A small file written whole or not at all, on a local disk or an object store, through Beam's
FileSystems (which the GCS emulator's credentials reach): a reader never finds half of it.

    write_whole(path, data)                  # an episode's journal entry
    write_whole(path, data, durable=True)    # a commit marker: also synced to the disk
"""

from __future__ import annotations

import os
import uuid

from apache_beam.io.filesystems import FileSystems


def write_whole(path: str, data: bytes, durable: bool = False) -> None:
    """Write `data` at `path`: on a local disk to a temporary name in the same folder, renamed
    into place (`durable`: synced first, so a power cut leaves the old file or the new one); an
    object store creates an object whole or not at all."""
    if "://" in path:
        with FileSystems.create(path) as f:
            f.write(data)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
