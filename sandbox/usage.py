"""What this process's sandboxes used, as plain tallies: pools opened, servers started, uid leases.

The sandbox package imports nothing of Beam, so it keeps its figures here (thread-safe, process
wide) and a Beam stage turns their growth into counters (transforms/execute.py `report_usage`):
each worker process reports its own, and the run log sums them.

    tally("servers_started")            # one more
    held = hold("uids_held", +1)        # a level: its peak is kept as "<name>_peak"
    snapshot()                          # {"servers_started": 3, "uids_held_peak": 2, ...}
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
_TALLIES: dict[str, float] = {}
_LEVELS: dict[str, int] = {}


def tally(name: str, n: float = 1) -> None:
    """Add `n` to the tally `name`."""
    with _LOCK:
        _TALLIES[name] = _TALLIES.get(name, 0) + n


def hold(name: str, delta: int) -> int:
    """Move the level `name` by `delta`; its highest value so far is the tally `<name>_peak`.
    Returns the level now."""
    with _LOCK:
        level = _LEVELS[name] = _LEVELS.get(name, 0) + delta
        peak = f"{name}_peak"
        _TALLIES[peak] = max(_TALLIES.get(peak, 0), level)
        return level


def level(name: str) -> int:
    with _LOCK:
        return _LEVELS.get(name, 0)


def snapshot() -> dict[str, float]:
    """Every tally so far (peaks included), for a counter's delta or a test's look."""
    with _LOCK:
        return dict(_TALLIES)
