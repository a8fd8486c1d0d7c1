"""The verifier framework: the registry, the bounded worker every verification runs in, the
scoring of harness reports, the hack detectors, answer keys. Plain functions, bounded in time and
memory; no Beam. The verifiers themselves live with their task families (families/<family>/).

`get_verifier(name)` finds every kind registered here or in a family (see `registry.py`).
"""

from flywheel.verifiers.registry import (VERIFIERS, Verdict, Verifier, available_verifiers,
                                         get_verifier, register_verifier)

__all__ = ["VERIFIERS", "Verdict", "Verifier", "available_verifiers", "get_verifier",
           "register_verifier"]
