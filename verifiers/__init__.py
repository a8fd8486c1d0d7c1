"""Verifiers: deterministic scoring of a response (and its sandbox result) against a task, and
the hack detectors they share. Plain functions, bounded in time and memory; no Beam.

`get_verifier(name)` finds every kind registered in this package (see `registry.py`).
"""

from flywheel.verifiers.registry import (VERIFIERS, Verdict, Verifier, available_verifiers,
                                         get_verifier, register_verifier)
from flywheel.verifiers import basic  # noqa: F401  (the small kinds, registered on import)

__all__ = ["VERIFIERS", "Verdict", "Verifier", "available_verifiers", "get_verifier",
           "register_verifier"]
