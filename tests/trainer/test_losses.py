import pytest
import torch

from flywheel.trainer.losses import LOSSES


def test_ratio_one_is_the_plain_policy_gradient():
    logp = torch.randn(3, 5, requires_grad=True)
    adv = torch.tensor([1.0, -2.0, 0.5])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 0, 0, 0]], dtype=torch.float32)
    loss, stats = LOSSES.get("grpo")(logp, logp.detach(), adv, mask, 0.2)
    loss.backward()
    pg = -(adv[:, None] * mask).sum() / mask.sum()  # value of -A * ratio at ratio 1
    torch.testing.assert_close(loss, pg)
    torch.testing.assert_close(logp.grad, -adv[:, None] * mask / mask.sum())  # REINFORCE gradient
    assert stats == {"clip_frac": 0.0, "approx_kl": 0.0}


def test_large_ratio_is_clipped():
    old = torch.zeros(2, 3)
    new = torch.full((2, 3), 1.0, requires_grad=True)  # ratio e ~ 2.7
    mask = torch.ones(2, 3)
    loss, stats = LOSSES.get("grpo")(new, old, torch.tensor([1.0, -1.0]), mask, 0.2)
    loss.backward()
    # Positive advantage: capped at 1.2, no gradient. Negative: the unclipped (worse) term is kept.
    assert loss.item() == pytest.approx((-1.2 + torch.e) / 2)
    assert torch.all(new.grad[0] == 0) and torch.all(new.grad[1] > 0)
    assert stats["clip_frac"] == 0.5 and stats["approx_kl"] > 0


def test_padding_garbage_is_ignored():
    logp, old, mask = torch.zeros(1, 3), torch.zeros(1, 3), torch.tensor([[1.0, 0.0, 0.0]])
    old[0, 1:] = -1e4
    loss, _ = LOSSES.get("grpo")(logp, old, torch.ones(1), mask, 0.2)
    assert torch.isfinite(loss) and loss.item() == -1.0


def test_registry_refuses_duplicates():
    with pytest.raises(ValueError):
        LOSSES.register("grpo")(lambda *a: None)
