"""Group-relative advantages and the filtering rules, on hand-made groups."""

import pytest

from flywheel.transforms.attempt import Attempt
from flywheel.transforms.filters import apply_filters, filter_reason
from flywheel.transforms.rewards import NormalizeRewards, normalize_group


def attempt(i, reward, verdict=None, **extra):
    return Attempt("r", 0, 0, "train", "add", "t", "0/train/t", i, "1+1=", {}, 1.0, 4, 0,
                   reward_raw=reward, verdict=verdict or ("pass" if reward == 1 else "fail"), **extra)


def test_group_advantages_exclude_errors_and_exploits():
    group = [attempt(0, 1.0), attempt(1, 0.0), attempt(2, 0.0, "error", failure="verifier"),
             attempt(3, 0.0, exploit_suspected=True)]
    out = {a.sample_index: a for a in normalize_group(group, "grpo")}
    assert out[0].advantage == pytest.approx(1.0, abs=1e-5)
    assert out[1].advantage == pytest.approx(-1.0, abs=1e-5)
    assert out[2].advantage == 0 and out[3].advantage == 0
    reasons = {i: apply_filters(a).filter_reason for i, a in out.items()}
    assert reasons == {0: None, 1: None, 2: "verifier_error", 3: "exploit_suspected"}


def test_equal_rewards_are_zero_variance_and_kept():
    out = normalize_group([attempt(i, 0.0) for i in range(4)], "grpo")
    assert len(out) == 4 and all(a.advantage == 0 for a in out)
    assert {apply_filters(a).filter_reason for a in out} == {"zero_variance"}


def test_truncated_is_filtered_only_when_asked():
    a = attempt(0, 1.0, finish_reason="length")
    assert filter_reason(a) is None
    assert filter_reason(a, filter_truncated=True) == "truncated"


def test_unknown_estimator_fails_at_construction():
    with pytest.raises(KeyError):
        NormalizeRewards("nope")
