"""The credit module on hand-made groups: group estimators, per-turn returns and estimators, the
one `has_signal`, and the per-token advantages the trainer's batches carry."""
import numpy as np
import pytest
import torch

from flywheel.trainer.credit import (ADVANTAGES, CREDITS, assign_credit, group_advantages,
                                     has_signal, token_advantages, turn_returns)


def test_known_values():
    r = np.array([1.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(ADVANTAGES.get("grpo")(r), [1, -1, -1, 1], atol=1e-5)
    np.testing.assert_allclose(ADVANTAGES.get("dr_grpo")(r), [0.5, -0.5, -0.5, 0.5])
    np.testing.assert_allclose(ADVANTAGES.get("rloo")(np.array([1.0, 0.0, 0.0])), [1, -0.5, -0.5])


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_zero_variance_group_has_no_advantage(name):
    fn = ADVANTAGES.get(name)
    np.testing.assert_array_equal(fn(np.full(8, 0.7)), np.zeros(8))
    assert fn(np.array([1.0])).shape == (1,)
    assert abs(fn(np.array([0.2, 0.9, 0.4])).sum()) < 1e-9  # group-relative: sums to zero
    # A tie is exactly no signal through the dispatcher, whatever the estimator's rounding
    # (dr_grpo alone gives 0.1 - mean(0.1 x 3) = -1.4e-17).
    assert fn(np.full(3, 0.1)).any() or name != "dr_grpo"
    np.testing.assert_array_equal(group_advantages(np.full(3, 0.1), name), np.zeros(3))


def test_registries_refuse_duplicates_and_name_unknowns():
    with pytest.raises(ValueError):
        ADVANTAGES.register("grpo")(lambda r: r)
    with pytest.raises(KeyError, match="grpo"):
        ADVANTAGES.get("nope")
    with pytest.raises(KeyError, match="outcome, turn"):
        CREDITS.get("token")


def test_turn_returns_are_the_discounted_outcome_less_the_score_before():
    # Scores after each turn 0.5, (none: a scratch run), 0.75, (the last: the verified outcome 1.0
    # stands for it). Scores before each turn: 0, 0.5, 0.5, 0.75.
    np.testing.assert_allclose(turn_returns(1.0, [0.5, None, 0.75, 0.5], 1.0), [1.0, 0.5, 0.5, 0.25])
    np.testing.assert_allclose(turn_returns(1.0, [0.5, None, 0.75, 0.5], 0.5),
                               [0.125, 0.25 - 0.5, 0.5 - 0.5, 1.0 - 0.75])
    # Undiscounted, the per-turn rewards (each return less the next) sum to the outcome.
    returns = turn_returns(0.8, [0.25, None, 0.5, 0.25, 0.1], 1.0)
    assert returns[0] == pytest.approx(0.8) and returns[-1] == pytest.approx(0.8 - 0.25)
    # A turn never scores above the verified outcome: visible tests passed by code the hidden
    # ones refute earn nothing, and losing them again costs nothing either.
    np.testing.assert_allclose(turn_returns(0.0, [1.0, 1.0], 1.0), [0.0, 0.0])
    # A regression: the turn after the one that broke passing code starts from a lower score.
    np.testing.assert_allclose(turn_returns(0.5, [1.0, 0.0, 0.5], 1.0), [0.5, 0.0, 0.5])


@pytest.mark.parametrize("discount", [1.0, 0.9])
def test_padding_an_episode_with_partial_turns_does_not_raise_early_returns(discount):
    """Re-running the same tests (partial score 0.5) three more times before the fix pays nothing:
    the first turn's return stays (discount 1) or falls (discount < 1). Summing each turn's
    partial score with the outcome, as returns did before, raised it from 2.5 to 4.0."""
    direct = turn_returns(1.0, [0.5, 1.0], discount)
    padded = turn_returns(1.0, [0.5, 0.5, 0.5, 0.5, 1.0], discount)
    assert padded[0] <= direct[0] + 1e-12
    assert padded[0] == pytest.approx(direct[0]) if discount == 1.0 else padded[0] < direct[0]
    # ...and through the per-turn estimator, the padded episode's first turn gains nothing over
    # the direct one's in the same group.
    _, (d, p) = assign_credit([1.0, 1.0], [[0.5, 1.0], [0.5, 0.5, 0.5, 0.5, 1.0]], "grpo", "turn",
                              discount)
    assert p[0] <= d[0] + 1e-12


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo"])
def test_turn_credit_normalizes_with_the_chosen_estimator(estimator):
    scores = [[0.5, 1.0], [0.0, 0.0]]
    _, per_turn = assign_credit([1.0, 0.0], scores, estimator, "turn", 1.0)
    pooled = np.concatenate([turn_returns(1.0, scores[0], 1.0), turn_returns(0.0, scores[1], 1.0)])
    np.testing.assert_allclose(np.concatenate(per_turn), ADVANTAGES.get(estimator)(pooled))


def test_outcome_credit_broadcasts_the_group_advantage_and_skips_single_turns():
    advantages, per_turn = assign_credit([1.0, 0.0, 0.0], [[0.0, 1.0], [0.0], None], "rloo",
                                         "outcome", 1.0)
    np.testing.assert_allclose(advantages, [1.0, -0.5, -0.5])
    np.testing.assert_allclose(per_turn[0], [1.0, 1.0])
    np.testing.assert_allclose(per_turn[1], [-0.5])
    assert per_turn[2] is None  # not an episode: its tokens carry the row's advantage


def _row(advantage, turn_advantages, filtered=False):
    turns = [{"advantage": a, "action_start": 2 * k, "action_end": 2 * k + 1}
             for k, a in enumerate(turn_advantages)]
    return {"advantage": advantage, "turns": turns, "filtered": filtered,
            "prompt_token_ids": [1, 2], "response_token_ids": [5, 6, 7, 8][:2 * len(turns)]}


def test_a_tied_group_has_per_turn_signal_only_when_its_returns_differ():
    """Both episodes solve the task (outcomes tie: no outcome signal). One got there in one jump,
    the other through a half-way turn: under turn credit their turns' returns differ and carry
    signal; under outcome credit nothing does. Two one-jump solutions tie per turn too."""
    outcomes, steps = [1.0, 1.0], [[0.0, 1.0], [0.5, 1.0]]
    for credit, expected in [("turn", True), ("outcome", False)]:
        advantages, per_turn = assign_credit(outcomes, steps, "grpo", credit, 1.0)
        assert advantages.tolist() == [0.0, 0.0]
        rows = [_row(a, t) for a, t in zip(advantages, per_turn)]
        assert any(has_signal(r, credit) for r in rows) is expected, credit
    advantages, per_turn = assign_credit(outcomes, [[0.0, 1.0], [0.0, 1.0]], "grpo", "turn", 1.0)
    assert not any(has_signal(_row(a, t), "turn") for a, t in zip(advantages, per_turn))


def test_has_signal_is_the_one_rule():
    assert has_signal(_row(0.5, []), "outcome") and not has_signal(_row(0.0, []), "outcome")
    assert not has_signal(_row(0.5, [], filtered=True), "outcome")
    # Under turn credit an episode's turns speak for its tokens; a row without them, the row.
    assert has_signal(_row(0.0, [0.0, 0.7]), "turn") and not has_signal(_row(0.0, [0.7]), "outcome")
    assert not has_signal(_row(0.5, [0.0, 0.0]), "turn") and has_signal(_row(0.5, []), "turn")
    assert has_signal(_row(float("nan"), []), "outcome")  # refused later, never dropped unseen
    assert has_signal({"advantage": None, "filtered": None}, "outcome")


def test_token_advantages_per_credit():
    rows = [_row(0.25, [1.0, -1.0]), _row(-0.5, [])]
    # Row 0: prompt 2 tokens, so response token t is predicted at position 1 + t; its actions are
    # tokens 0 and 2 (observations at 1 and 3 are masked out by make_batch, whatever they hold).
    out = token_advantages(rows, "turn", 6)
    assert out.shape == (2, 5) and out.dtype == torch.float32
    assert out.tolist() == [[0.25, 1.0, 0.25, -1.0, 0.25], [-0.5] * 5]
    assert token_advantages(rows, "outcome", 6).tolist() == [[0.25] * 5, [-0.5] * 5]
