"""Beam's GCS credentials where an emulator stands in for GCS ($STORAGE_EMULATOR_HOST).

Beam looks for Google default credentials once per process, retrying for about 25 s when there
are none (an emulator needs none), before it goes anonymous. With an emulator set, say
anonymous at once: Beam's own credential cache is filled with "none", which is what it would
have decided after the retries. Called where the driver and the workers first touch gs://.
"""

import os

import apache_beam as beam  # noqa: F401 (this module belongs with Beam: transforms/)


def anonymous_for_emulator() -> None:
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return
    try:
        from apache_beam.internal.gcp import auth
    except ImportError:  # Beam without its gcp extra: it has no GCS filesystem either
        return
    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials, auth._Credentials._credentials_init = None, True
