"""Local paths and pyarrow.fs URIs (gs://, file://, ...) behind one call."""
import os

import pyarrow.fs as pafs


def resolve_uri(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path without a trailing slash); a plain path may be relative."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path.rstrip("/")
