"""Local paths and pyarrow.fs URIs (gs://, file://, ...) behind one call.

gs:// goes to pyarrow's GcsFileSystem with a bounded retry time (its default retries a failing
call for 15 minutes, which is how an unreachable endpoint looks like a hang), and to the GCS
emulator at $STORAGE_EMULATOR_HOST when that is set, anonymously, as Google's own client
libraries (and so Beam's gcsio) do: without it, pyarrow would talk to the real service while
Beam wrote to the emulator.
"""
import os
from datetime import timedelta
from urllib.parse import urlsplit

import pyarrow.fs as pafs

GCS_RETRY_LIMIT = timedelta(seconds=60)


def resolve_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path without a trailing slash); a plain path may be relative."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    if uri.startswith("gs://") and "?" not in uri and "@" not in uri.split("/")[2]:
        return gcs_filesystem(), uri[len("gs://"):].rstrip("/")  # else the URI says how itself
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path.rstrip("/")


def gcs_filesystem() -> pafs.GcsFileSystem:
    emulator = os.environ.get("STORAGE_EMULATOR_HOST")
    if emulator:
        parts = urlsplit(emulator if "://" in emulator else f"http://{emulator}")
        return pafs.GcsFileSystem(anonymous=True, endpoint_override=parts.netloc,
                                  scheme=parts.scheme, retry_time_limit=GCS_RETRY_LIMIT)
    return pafs.GcsFileSystem(retry_time_limit=GCS_RETRY_LIMIT)
