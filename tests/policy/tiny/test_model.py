import torch

import pytest

from flywheel.policy.backends.tiny.model import TinyConfig, build_transformer, policy_logprobs
from flywheel.policy.backends.tiny.tokens import BOS, EOS, PAD


def test_config_round_trip():
    cfg = TinyConfig(d_model=32, n_layers=2)
    assert TinyConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="d_model"):  # an unknown option names the known ones
        TinyConfig.from_dict({"width": 3})


def test_build_transformer_is_deterministic_and_tied():
    a, b, c = (build_transformer(TinyConfig(), seed) for seed in (1, 1, 2))
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(pa, pb), name
    assert not torch.equal(a.tok_emb.weight, c.tok_emb.weight)
    assert a.head.weight is a.tok_emb.weight


def test_left_padding_gives_the_same_logits():
    model = build_transformer(TinyConfig(), 0).eval()
    row = torch.tensor([[BOS, 49, 55, 43, 53, 61, 50]])
    with torch.no_grad():
        alone = model(row)
        padded = torch.cat([torch.full((1, 5), PAD), row], 1)
        other = torch.tensor([[BOS] + list(range(60, 71))])
        mask = torch.cat([torch.zeros(1, 5, dtype=torch.bool), torch.ones(1, 7, dtype=torch.bool)], 1)
        batch = model(torch.cat([padded, other]), torch.cat([mask, torch.ones(1, 12, dtype=torch.bool)]))
    assert torch.isfinite(batch).all()  # padding-only query rows must not be NaN
    torch.testing.assert_close(batch[0, 5:], alone[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(batch[1:], model(other), atol=1e-5, rtol=0)


def test_policy_logprobs_bans_specials_but_eos():
    logp = policy_logprobs(torch.zeros(2, 260), torch.tensor([0.0, 2.0]))
    probs = logp.exp()
    assert probs[:, [BOS, PAD, 259]].sum() == 0 and (probs[:, EOS] > 0).all()
    torch.testing.assert_close(probs.sum(1), torch.ones(2))
