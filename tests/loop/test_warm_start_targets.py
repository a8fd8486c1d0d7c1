"""The warm start's per-domain targets (loop/warm_start.py `_pick`): a domain past its target
keeps a tenth of the demonstrations, the others share the rest; with all retired, all share."""

import random
from collections import Counter
from types import SimpleNamespace

from flywheel.loop.warm_start import RETIRED_SHARE, _pick


def test_a_retired_domain_keeps_a_tenth_of_the_demonstrations():
    domains = [SimpleNamespace(name=n) for n in ("a", "b", "c")]
    rng = random.Random(0)
    picks = Counter(_pick(domains, {"a"}, rng).name for _ in range(20000))
    assert abs(picks["a"] / 20000 - RETIRED_SHARE) < 0.01
    assert abs(picks["b"] - picks["c"]) / 20000 < 0.02
    every = Counter(_pick(domains, {"a", "b", "c"}, rng).name for _ in range(3000))
    assert set(every) == {"a", "b", "c"}
