"""Off-policy correction for rows sampled by older weights (trainer/off_policy.py): importance
weights equal hand-computed ones, the staleness bound admits exactly the allowed versions, and a
decoupled update's gradient is the synchronous one weighted by pi_prox / pi_b."""

import math
from collections import Counter

import numpy as np
import pytest
import torch

from flywheel.policy.checkpoint import policy_digest, save_checkpoint
from flywheel.trainer.losses import LOSSES
from flywheel.trainer.off_policy import StalePolicyError, behaviour_weights, check_staleness
from flywheel.trainer.train import train_iteration
from flywheel.trainer.train_step import RLObjective, TrainConfig
from flywheel.trainer.update_loop import accumulate
from flywheel.trainer.algorithm import Algorithm

from tests.trainer.test_stale_policy import _policy, _rows, _write


def test_weights_are_the_capped_ratio_of_proximal_to_behaviour():
    proximal = torch.tensor([[math.log(0.5), math.log(0.9), math.log(0.2), 0.0]])
    behaviour = torch.tensor([[math.log(0.25), math.log(0.9), math.log(0.8), 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    weights, stats = behaviour_weights(proximal, behaviour, mask, cap=1.5)
    # 0.5/0.25 = 2 -> capped 1.5; 0.9/0.9 = 1; 0.2/0.8 = 0.25; outside the mask 0
    assert weights[0].tolist() == pytest.approx([1.5, 1.0, 0.25, 0.0])
    assert stats["is_weight_mean"] == pytest.approx((1.5 + 1.0 + 0.25) / 3)
    assert stats["is_weight_max"] == pytest.approx(2.0)
    assert stats["is_clip_frac"] == pytest.approx(1 / 3)
    assert not weights.requires_grad


def test_a_far_off_behaviour_policy_cannot_overflow_the_weight():
    weights, stats = behaviour_weights(torch.tensor([[0.0]]), torch.tensor([[-1e4]]),
                                       torch.tensor([[1.0]]), cap=2.0)
    assert weights.item() == 2.0 and math.isfinite(stats["is_weight_max"])


def test_loss_token_weights_multiply_the_per_token_terms():
    logprobs = torch.log(torch.tensor([[0.5, 0.4, 0.3]])).requires_grad_()
    old = logprobs.detach().clone()
    adv, mask = torch.tensor([1.0]), torch.ones(1, 3)
    weights = torch.tensor([[1.0, 0.5, 2.0]])
    loss, _ = LOSSES.get("dapo")(logprobs, old, adv, mask, token_weights=weights)
    # ratio 1 everywhere: each term is -A * 1 * w, token-mean over 3
    assert loss.item() == pytest.approx(-(1.0 + 0.5 + 2.0) / 3)
    loss.backward()
    assert logprobs.grad[0].tolist() == pytest.approx([-1 / 3, -0.5 / 3, -2 / 3])


def test_the_staleness_check_admits_the_allowed_versions_and_names_the_others():
    allowed = {"sha:k1": 0, "sha:k0": 1}
    figures = check_staleness(Counter({"sha:k1": 3, "sha:k0": 5, None: 2}), allowed, "T", "ck1")
    assert figures == {"stale_rows": 5, "staleness_mean": 5 / 8, "staleness_max": 1}
    with pytest.raises(StalePolicyError) as e:
        check_staleness(Counter({"sha:k0": 5, "sha:old": 2}), allowed, "tables/it=3", "ck1")
    assert "2 of 7 trajectory rows" in str(e.value) and "sha:old" in str(e.value)
    assert "max_staleness 1" in str(e.value)


def _grads(policy, rows, cfg, proximal=None, start_digest=None):
    policy.module.zero_grad(set_to_none=True)
    algorithm = Algorithm(loss="dapo")  # token-mean: the weights scale the loss linearly
    overrides = {**cfg.loss_overrides(rows), "aggregation": algorithm.loss_aggregation()}
    names = ["pg_loss", "is_weight_mean", "is_weight_max", "is_clip_frac"]
    objective = RLObjective(policy, cfg, algorithm, overrides, None, "cpu", names, start_digest,
                            proximal)
    stats = accumulate(policy, rows, objective)
    return {n: p.grad.clone() for n, p in policy.module.named_parameters()
            if p.grad is not None}, stats


def test_the_decoupled_gradient_is_the_synchronous_one_times_the_weight():
    """Stale rows whose behaviour log-probs sit log(0.7) below the proximal policy's on every
    token have weight 1/0.7 = 1.43 (under the cap): with a token-mean loss at ratio 1 the
    gradient is 1/0.7 x the gradient of the same rows as the sampler's own."""
    policy = _policy(0)
    policy.module.train()
    digest = policy_digest(policy)
    rows = _rows(policy, digest)
    cfg = TrainConfig(minibatch_size=8)
    # the synchronous reference: old = the trainer's own log-probs, so the ratio is exactly 1
    from flywheel.trainer.trajectory_batches import first_scored, make_batch
    b = make_batch(rows, policy.pad_id)
    with torch.no_grad():
        own = policy.token_logprobs(b["input_ids"], b["attn_mask"], b["temperatures"],
                                    first_scored(rows))
    exact = []
    for i, r in enumerate(rows):
        p, n = len(r["prompt_token_ids"]), len(r["response_token_ids"])
        exact.append(dict(r, response_logprobs=own[i, p - 1:p - 1 + n].tolist()))
    sync, _ = _grads(policy, exact, cfg)
    shifted = [dict(r, checkpoint_digest="sha:older",
                    response_logprobs=[v + math.log(0.7) for v in r["response_logprobs"]])
               for r in exact]
    proximal = _policy(0)
    proximal.module.eval().requires_grad_(False)
    stale, stats = _grads(policy, shifted, cfg, proximal, digest)
    assert stats["is_weight_mean"] == pytest.approx(1 / 0.7, rel=1e-5)
    assert stats["is_clip_frac"] == 0.0
    for name, g in sync.items():
        torch.testing.assert_close(stale[name], g / 0.7, rtol=1e-4, atol=1e-7)
    # uncorrected (behaviour mode): the ratio pi / pi_b = 1.43 is clipped at 1 + 0.28: no
    # gradient through clipped tokens, a different update
    plain, _ = _grads(policy, shifted, TrainConfig(minibatch_size=8, off_policy="behaviour"))
    assert any(not torch.allclose(plain[n], stale[n]) for n in sync)


def test_train_iteration_takes_rows_within_the_bound_and_refuses_older_ones(tmp_path):
    v0, v1, v2 = _policy(0), _policy(1), _policy(2)
    uris = {k: str(tmp_path / f"ck{k}") for k in range(3)}
    digests = {k: save_checkpoint(uris[k], p, None, {"policy_version": k})
               for k, p in enumerate((v0, v1, v2))}
    folder = tmp_path / "trajectories" / "iteration=2"
    _write(folder / "domain=a", _rows(v1, digests[1]))      # one version behind ck2
    _write(folder / "domain=b", _rows(v2, digests[2], n=4))  # ck2's own
    stats = train_iteration(str(folder), uris[2], str(tmp_path / "out"),
                            TrainConfig(minibatch_size=4), seed=0,
                            older_checkpoint_uris=[uris[1]])
    assert stats["stale_rows"] == 8 and stats["staleness_max"] == 1
    assert stats["staleness_mean"] == pytest.approx(8 / 12)
    assert np.isfinite(stats["is_weight_mean"]) and stats["is_weight_max"] > 0
    _write(folder / "domain=c", _rows(v0, digests[0], n=2))  # two behind: past the bound
    with pytest.raises(StalePolicyError, match="2 of 14 trajectory rows"):
        train_iteration(str(folder), uris[2], str(tmp_path / "out2"),
                        TrainConfig(minibatch_size=4), seed=0, older_checkpoint_uris=[uris[1]])


def test_stale_rows_without_signal_train_nothing_and_weigh_nothing(tmp_path):
    """An overlapped update whose stale rows all have advantage 0: no step, and importance
    weights of 1 (none applied), not 0."""
    v1, v2 = _policy(1), _policy(2)
    uris = {k: str(tmp_path / f"ck{k}") for k in (1, 2)}
    digests = {k: save_checkpoint(uris[k], p, None, {"policy_version": k})
               for k, p in ((1, v1), (2, v2))}
    rows = [{**r, "advantage": 0.0} for r in _rows(v1, digests[1])]
    _write(tmp_path / "trajectories" / "iteration=2" / "domain=a", rows)
    stats = train_iteration(str(tmp_path / "trajectories" / "iteration=2"), uris[2],
                            str(tmp_path / "out"), TrainConfig(minibatch_size=4), seed=0,
                            older_checkpoint_uris=[uris[1]])
    assert stats["n_steps"] == 0 and stats["stale_rows"] == 8
    assert (stats["is_weight_mean"], stats["is_weight_max"], stats["is_clip_frac"]) == (1.0, 1.0, 0.0)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="unknown off_policy"):
        TrainConfig(off_policy="magic")
    with pytest.raises(ValueError, match="is_cap"):
        TrainConfig(is_cap=0.5)
