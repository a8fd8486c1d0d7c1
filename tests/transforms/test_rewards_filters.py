"""Group-relative advantages and the filtering rules, on hand-made groups."""

import pytest

from flywheel.trainer.algorithm import Algorithm
from flywheel.trainer.credit import has_signal
from flywheel.records.attempt import Attempt
from flywheel.transforms.filters import apply_filters, filter_reason
from flywheel.transforms.rewards import NormalizeRewards, normalize_group


def attempt(i, reward, verdict=None, **extra):
    return Attempt("r", 0, 0, "train", "add", "t", "0/train/t", i, "1+1=", {}, 1.0, 4, 0,
                   reward_raw=reward, verdict=verdict or ("pass" if reward == 1 else "fail"), **extra)


def episode(i, outcome, scores):
    """An episode whose turns scored `scores` (None: the turn scored nothing), verified `outcome`."""
    turns = [{"action": f"run_tests {k}", "action_start": 2 * k, "action_end": 2 * k + 1,
              "reward": s} for k, s in enumerate(scores)]
    return attempt(i, outcome, episode_end="solved" if outcome == 1 else "max_turns", turns=turns)


def test_group_advantages_exclude_errors_and_exploits():
    group = [attempt(0, 1.0), attempt(1, 0.0), attempt(2, 0.0, "error", failure="verifier"),
             attempt(3, 0.0, exploit_suspected=True)]
    out = {a.sample_index: a for a in normalize_group(group)}
    assert out[0].advantage == pytest.approx(1.0, abs=1e-5)
    assert out[1].advantage == pytest.approx(-1.0, abs=1e-5)
    assert out[2].advantage == 0 and out[3].advantage == 0
    reasons = {i: apply_filters(a).filter_reason for i, a in out.items()}
    assert reasons == {0: None, 1: None, 2: "verifier_error", 3: "exploit_suspected"}


def test_equal_rewards_are_zero_variance_and_kept():
    out = normalize_group([attempt(i, 0.0) for i in range(4)])
    assert len(out) == 4 and all(a.advantage == 0 for a in out)
    assert {apply_filters(a).filter_reason for a in out} == {"zero_variance"}


@pytest.mark.parametrize("credit", ["outcome", "turn"])
def test_a_tied_group_is_kept_or_dropped_by_one_rule(credit):
    """Both episodes solve the task, so the outcomes tie; one reached half the visible tests on its
    first turn, the other nothing. Under turn credit the per-turn returns differ, so the group
    keeps its per-turn advantages and is not filtered: the rows the trainer selects (has_signal)
    are exactly the unfiltered ones. Under outcome credit the group is zero-variance, every turn at
    advantage 0, and dropped. (Before, turn credit computed per-turn advantages for the group and
    then flagged it zero_variance, so they were never trained on.)"""
    algorithm = Algorithm(credit=credit)
    out = [apply_filters(a) for a in normalize_group([episode(0, 1.0, [0.5, 1.0]),
                                                      episode(1, 1.0, [0.0, 1.0])], algorithm)]
    per_turn = [t["advantage"] for a in out for t in a.turns]
    assert [a.advantage for a in out] == [0.0, 0.0]
    if credit == "turn":
        assert not any(a.filtered for a in out) and any(per_turn)
    else:
        assert {a.filter_reason for a in out} == {"zero_variance"} and not any(per_turn)
    assert [has_signal(a.row(), credit) for a in out] == [not a.filtered for a in out]


def test_a_group_tied_turn_by_turn_too_is_dropped_under_turn_credit():
    out = [apply_filters(a) for a in normalize_group(
        [episode(0, 1.0, [0.0, 1.0]), episode(1, 1.0, [None, 1.0])], Algorithm(credit="turn"))]
    assert {a.filter_reason for a in out} == {"zero_variance"}
    assert all(t["advantage"] == 0 for a in out for t in a.turns)


def test_padding_an_episode_with_partial_turns_does_not_raise_its_early_turns():
    """Two episodes reach the same solution from the same half-right first try; one re-runs the
    same tests three times before fixing it. Its first turn must not come out ahead of the
    direct one's (before, every re-run's partial score was added to the earlier turns' returns,
    so padding an episode raised its first turn's advantage)."""
    for discount in (1.0, 0.9):
        direct, padded, failed = normalize_group(
            [episode(0, 1.0, [0.5, 1.0]), episode(1, 1.0, [0.5, 0.5, 0.5, 0.5, 1.0]),
             episode(2, 0.0, [0.0, 0.0])], Algorithm(credit="turn", discount=discount))
        assert padded.turns[0]["advantage"] <= direct.turns[0]["advantage"] + 1e-9, discount
        assert failed.turns[0]["advantage"] < direct.turns[0]["advantage"]


def test_outcome_credit_records_the_row_advantage_on_every_turn():
    solved, failed = normalize_group([episode(0, 1.0, [0.0, 1.0]), episode(1, 0.0, [0.0])])
    assert [t["advantage"] for t in solved.turns] == [solved.advantage] * 2
    assert [t["advantage"] for t in failed.turns] == [failed.advantage] and solved.advantage > 0


def test_truncated_is_filtered_only_when_asked():
    a = attempt(0, 1.0, finish_reason="length")
    assert filter_reason(a) is None
    assert filter_reason(a, filter_truncated=True) == "truncated"


@pytest.mark.parametrize("algorithm", [Algorithm(advantage="nope"), Algorithm(credit="nope"),
                                       Algorithm(loss="nope"), Algorithm(aggregation="nope")])
def test_unknown_names_fail_at_construction(algorithm):
    with pytest.raises(KeyError, match="nope"):
        NormalizeRewards(algorithm)
