"""A small domain's budget share filled by sampling its few tasks more (steering.fill_repeats):
SampleByBudget marks each chosen task with its group scale, Expand samples n_samples x scale."""

from collections import Counter

import apache_beam as beam
from apache_beam.testing.util import BeamAssertException, assert_that

from flywheel.domains.registry import get_domain
from flywheel.steering.budgets import Budget
from flywheel.steering.samplers import Policy
from flywheel.transforms.expand import Expand
from flywheel.transforms.sample_by_budget import SampleByBudget

IDS = dict(run_id="r", iteration=0, policy_version=0)


def expect(attempts: dict, group_sizes: dict):
    """A matcher: attempts per domain, the sorted group sizes per domain, unique indices."""
    def check(rows):
        found = Counter(a.domain for a in rows)
        groups = Counter((a.domain, a.group_id) for a in rows)
        sizes = {d: sorted(n for (dd, _), n in groups.items() if dd == d) for d in attempts}
        unique = len({(a.task_id, a.sample_index) for a in rows}) == len(rows)
        if found != attempts or sizes != group_sizes or not unique:
            raise BeamAssertException(f"attempts {dict(found)}, groups {sizes}, unique {unique}")
    return check


def run(sizes: dict[str, int], fill_repeats: int, attempts: int, matcher) -> None:
    tasks = [get_domain(d).make_task("train", i, 0) for d, n in sizes.items() for i in range(n)]
    with beam.Pipeline() as p:
        chosen = (p | beam.Create(tasks) | SampleByBudget(
            sampler="uniform", policy=Policy(), budget=Budget.parse([]), attempts=attempts,
            tasks_per_domain=4, n_samples=4, seed=0, history={}, fill_repeats=fill_repeats,
            **IDS))["tasks"]
        assert_that(chosen | Expand(**IDS, seed=0, n_samples=4, temperature=1.0, mode="train"),
                    matcher)


def test_a_small_domain_gets_its_share_in_bigger_groups():
    # 88 attempts / 4 = 22 task slots, half each: add has 2 tasks -> 11 slots, capped at
    # 2 x fill_repeats 4 = 8 -> groups of 4 x 4 = 16; interval takes the other 14 slots
    run({"add": 2, "interval": 20}, 4, 88,
        expect({"add": 32, "interval": 56}, {"add": [16, 16], "interval": [4] * 14}))


def test_without_repeats_the_share_goes_to_the_other_domain():
    run({"add": 2, "interval": 20}, 1, 88,
        expect({"add": 8, "interval": 80}, {"add": [4, 4], "interval": [4] * 20}))


def test_uneven_scales_add_up_to_the_quota_exactly():
    # 64 / 4 = 16 slots, 8 each: add's 3 tasks take 8 slots as scales 3, 3, 2 (groups 12, 12, 8)
    run({"add": 3, "interval": 20}, 4, 64,
        expect({"add": 32, "interval": 32}, {"add": [8, 12, 12], "interval": [4] * 8}))
    assert SampleByBudget.group_scales(35, 16) == [3, 3, 3] + [2] * 13
    assert SampleByBudget.group_scales(5, 8) == [1] * 8 and SampleByBudget.group_scales(0, 0) == []
