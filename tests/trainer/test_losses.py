"""Every loss against values worked out by hand (in the comments), gradients included."""
import math

import pytest
import torch

from flywheel.trainer.aggregation import AGGREGATIONS, agg_loss, aggregation_unit
from flywheel.trainer.losses import KL_ESTIMATORS, LOSSES, default_aggregation

# Two sequences, old log-probs 0, so each new log-prob is the log of its token's ratio.
# Sequence 0 (A = +1): ratios 1.1, 1.25 and one padding slot; sequence 1 (A = -1): 0.9, 0.7, 1.0.
RATIOS = [[1.1, 1.25, 7.0], [0.9, 0.7, 1.0]]
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
ADV = torch.tensor([1.0, -1.0])


def _call(name, **kw):
    new = torch.log(torch.tensor(RATIOS)).requires_grad_(True)
    loss, stats = LOSSES.get(name)(new, torch.zeros(2, 3), ADV, MASK, **kw)
    loss.backward()
    return loss.item(), stats, new.grad


def test_grpo_means_tokens_per_sequence_then_sequences():
    # Per token max(-A r, -A clip(r, 0.8, 1.2)): seq 0: -1.1, -1.2 (clipped) -> mean -1.15;
    # seq 1: 0.9, 0.8 (clipped), 1.0 -> mean 0.9. Loss (-1.15 + 0.9) / 2; 2 of 5 tokens clipped.
    loss, stats, grad = _call("grpo")
    assert loss == pytest.approx(-0.125)
    assert stats["clip_frac"] == pytest.approx(0.4)
    # d/d(log r) of -A r / |o_i| / 2 where unclipped; clipped tokens and padding get none.
    expected = torch.tensor([[-1.1 / 2 / 2, 0.0, 0.0], [0.9 / 3 / 2, 0.0, 1.0 / 3 / 2]])
    torch.testing.assert_close(grad, expected)


def test_dapo_clips_higher_and_means_over_all_tokens():
    # Upper bound 1.28: 1.25 is no longer clipped. Token mean (-1.1 - 1.25 + 0.9 + 0.8 + 1.0) / 5.
    loss, stats, grad = _call("dapo")
    assert loss == pytest.approx(0.07)
    assert stats["clip_frac"] == pytest.approx(0.2)
    expected = torch.tensor([[-1.1, -1.25, 0.0], [0.9, 0.0, 1.0]]) / 5
    torch.testing.assert_close(grad, expected)
    # The same call with GRPO's symmetric range clips 1.25 again.
    assert _call("dapo", clip_high=0.2)[1]["clip_frac"] == pytest.approx(0.4)


def test_dr_grpo_sums_tokens_over_a_constant():
    # Sum of token losses -1.1 - 1.2 + 0.9 + 0.8 + 1.0 = 0.4, over norm_length 4 x 2 sequences.
    loss, stats, grad = _call("dr_grpo", norm_length=4)
    assert loss == pytest.approx(0.05)
    assert stats["clip_frac"] == pytest.approx(0.4)
    torch.testing.assert_close(grad, torch.tensor([[-1.1, 0.0, 0.0], [0.9, 0.0, 1.0]]) / 8)
    # Without a constant the padded length (3) is used; the per-token gradient never depends on
    # the response's own length (Dr. GRPO's point).
    assert _call("dr_grpo")[0] == pytest.approx(0.4 / 6)


def test_gspo_uses_one_length_normalised_ratio_per_sequence():
    s0 = math.sqrt(1.1 * 1.25)             # 1.1726: geometric mean of the token ratios
    s1 = (0.9 * 0.7 * 1.0) ** (1 / 3)      # 0.8573
    loss, stats, grad = _call("gspo", clip_low=0.2, clip_high=0.2)
    assert loss == pytest.approx((-s0 + s1) / 2)
    assert stats["clip_frac"] == 0.0
    # d(-A s_i)/d log r_t = -A s_i / |o_i|, spread evenly over the sequence's tokens, / 2 sequences.
    expected = torch.tensor([[-s0 / 2 / 2] * 2 + [0.0], [s1 / 3 / 2] * 3])
    torch.testing.assert_close(grad, expected)
    # With its paper's range (3e-4 / 4e-4) both sequences are clipped: no gradient at all.
    loss, stats, grad = _call("gspo")
    assert loss == pytest.approx((-(1 + 4e-4) + (1 - 3e-4)) / 2, abs=1e-6)  # float32
    assert stats["clip_frac"] == 1.0 and torch.all(grad == 0)


@pytest.mark.parametrize("name", ["grpo", "dapo", "dr_grpo", "gspo"])
def test_ratio_one_is_the_policy_gradient_and_padding_is_ignored(name):
    logp = torch.randn(3, 5, requires_grad=True)
    old = logp.detach().clone()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=torch.float32)
    old[mask == 0] = -1e4  # padding may hold anything
    loss, stats = LOSSES.get(name)(logp, old, torch.tensor([1.0, -2.0, 0.5]), mask)
    loss.backward()
    assert torch.isfinite(loss) and torch.all(logp.grad[mask == 0] == 0)
    assert stats["clip_frac"] == 0.0 and stats["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert logp.grad[0, 0] < 0 < logp.grad[1, 0]  # raise what was good, lower what was bad


@pytest.mark.parametrize("aggregation, expected", [
    # GRPO's token losses: seq 0: -1.1, -1.2 (clipped); seq 1: 0.9, 0.8 (clipped), 1.0.
    ("seq-mean-token-mean", (-1.15 + 0.9) / 2),
    ("token-mean", 0.4 / 5),
    ("seq-mean-token-sum", (-2.3 + 2.7) / 2),
    ("seq-mean-token-sum-norm", 0.4 / (4 * 2)),   # norm_length 4
])
def test_the_aggregation_is_a_parameter_of_the_loss(aggregation, expected):
    loss, stats, grad = _call("grpo", aggregation=aggregation, norm_length=4)
    assert loss == pytest.approx(expected)
    assert stats["clip_frac"] == pytest.approx(0.4)  # the share of tokens, whichever average
    assert torch.all(grad[0, 1:] == 0) and torch.all(grad[1, 1] == 0)  # clipped and padding


def test_each_loss_keeps_its_papers_aggregation_and_units_follow():
    assert {name: default_aggregation(name) for name in ("grpo", "dapo", "dr_grpo", "gspo")} == {
        "grpo": "seq-mean-token-mean", "dapo": "token-mean", "dr_grpo": "seq-mean-token-sum-norm",
        "gspo": "seq-mean-token-mean"}
    assert {name: aggregation_unit(name) for name in AGGREGATIONS.names()} == {
        "token-mean": "token", "seq-mean-token-mean": "sequence",
        "seq-mean-token-sum": "sequence", "seq-mean-token-sum-norm": "sequence"}
    # A sequence without tokens counts in no mean (verl's modes would count it as a zero loss).
    losses = torch.tensor([[2.0, 4.0], [9.0, 9.0]])
    assert agg_loss(losses, torch.tensor([[1.0, 1.0], [0.0, 0.0]]), "seq-mean-token-sum") == 6.0


@pytest.mark.parametrize("name", ["grpo", "dapo", "dr_grpo", "gspo"])
def test_a_far_off_log_ratio_is_clamped_before_exp(name):
    """A token whose log-probability rose by 100 nats (exp overflows float32 at ~88): the ratio is
    exp(20) at most, the loss stays finite and that token's gradient is 0, as verl does."""
    new = torch.tensor([[100.0, 0.0], [0.0, 0.1]], requires_grad=True)
    loss, stats = LOSSES.get(name)(new, torch.zeros(2, 2), torch.tensor([-1.0, 1.0]),
                                   torch.ones(2, 2), clip_low=0.2, clip_high=0.2)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(new.grad).all() and new.grad[0, 0] == 0
    assert all(map(math.isfinite, stats.values()))


def test_kl_estimators():
    logp, ref = torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.25, 0.5]]))
    ln2 = math.log(2)
    torch.testing.assert_close(KL_ESTIMATORS.get("k1")(logp, ref), torch.tensor([[ln2, 0.0]]))
    torch.testing.assert_close(KL_ESTIMATORS.get("k2")(logp, ref), torch.tensor([[ln2**2 / 2, 0.0]]))
    # k3: exp(d) - d - 1 with d = ln(0.25 / 0.5) = -ln 2 -> 0.5 + ln 2 - 1
    torch.testing.assert_close(KL_ESTIMATORS.get("k3")(logp, ref), torch.tensor([[ln2 - 0.5, 0.0]]))
    far = KL_ESTIMATORS.get("k3")(torch.tensor([[-200.0]]), torch.tensor([[0.0]]))
    assert torch.isfinite(far).all()


def test_registries_refuse_duplicates_and_name_the_known():
    with pytest.raises(ValueError):
        LOSSES.register("grpo")(lambda *a: None)
    with pytest.raises(KeyError, match="dapo"):
        LOSSES.get("ppo2")
    assert set(LOSSES.names()) >= {"grpo", "dapo", "dr_grpo", "gspo"}
    assert set(KL_ESTIMATORS.names()) >= {"k1", "k2", "k3"}
