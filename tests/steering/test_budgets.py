"""Budgets (steering/budgets.py): shares by weight and tier, the floor, quotas that add up."""

import pytest

from flywheel.steering.budgets import Budget, quotas, with_floor


def test_equal_shares_without_settings():
    assert Budget.parse().shares(["a", "b", "c", "d"]) == pytest.approx(
        {"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25})


def test_weights_are_relative_shares():
    shares = Budget.parse(["a=3"]).shares(["a", "b"])
    assert shares == pytest.approx({"a": 0.75, "b": 0.25})


def test_a_tier_share_is_split_over_its_domains_and_the_rest_shared_by_weight():
    # tail holds 2 of 5 domains but half the attempts; the head's 3 share the other half by weight
    budget = Budget.parse(["h1=2"], ["t1=tail", "t2=tail"], ["tail=0.5"])
    shares = budget.shares(["h1", "h2", "h3", "t1", "t2"])
    assert shares == pytest.approx({"t1": 0.25, "t2": 0.25, "h1": 0.25, "h2": 0.125, "h3": 0.125})
    assert sum(shares.values()) == pytest.approx(1.0)


def test_the_floor_lifts_the_long_tail_and_takes_from_the_others_in_proportion():
    shares = Budget.parse(["big=97"], floor=0.1).shares(["big", "s1", "s2", "s3"])
    assert shares["s1"] == shares["s2"] == shares["s3"] == pytest.approx(0.1)
    assert shares["big"] == pytest.approx(0.7)
    lifted = with_floor({"a": 0.6, "b": 0.3, "c": 0.1}, 0.2)  # c lifted; a and b keep 2:1
    assert lifted == pytest.approx({"a": 0.8 * 2 / 3, "b": 0.8 / 3, "c": 0.2})


def test_a_floor_above_an_equal_share_gives_equal_shares():
    assert Budget.parse(["a=100"], floor=0.9).shares(["a", "b"]) == pytest.approx({"a": 0.5, "b": 0.5})


def test_quotas_add_up_and_give_every_domain_at_least_one_task():
    q = quotas({"a": 0.5, "b": 0.3, "c": 0.2}, 7)
    assert sum(q.values()) == 7 and q == {"a": 4, "b": 2, "c": 1}
    assert quotas({"a": 0.98, "b": 0.01, "c": 0.01}, 10)["b"] == 1


@pytest.mark.parametrize("kwargs, words", [
    ({"weights": ["a"]}, "not KEY=VALUE"), ({"weights": ["a=x"]}, "not a number"),
    ({"weights": ["a=-1"]}, ">= 0"), ({"tier_shares": ["x=0.7", "y=0.6"]}, "more than 1"),
    ({"floor": 1.0}, "steering.floor")])
def test_malformed_settings_name_the_setting(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Budget.parse(**kwargs)


def test_a_domain_short_of_tasks_hands_its_share_on():
    from flywheel.steering.budgets import quotas_within
    # equal shares of 104 tasks, but add has 8 and reverse 16: interval takes what they cannot
    shares = {"interval": 1 / 3, "add": 1 / 3, "reverse": 1 / 3}
    got = quotas_within(shares, 104, {"interval": 90, "add": 8, "reverse": 16})
    assert got == {"interval": 80, "add": 8, "reverse": 16}
    assert quotas_within(shares, 30, {"interval": 90, "add": 90, "reverse": 90}) == \
        {"interval": 10, "add": 10, "reverse": 10}
    assert sum(quotas_within(shares, 500, {"interval": 90, "add": 8, "reverse": 16}).values()) == 114


def test_without_the_one_task_minimum_quotas_never_exceed_the_tasks():
    shares = {d: 0.25 for d in "abcd"}
    assert sum(quotas(shares, 2, at_least_one=False).values()) == 2
    assert sum(quotas(shares, 2).values()) == 4
